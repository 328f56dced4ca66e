"""Videos whose display matrix turns the stored picture (phone videos) are decoded upright.

The expected pictures follow PyAV's definition of the matrix it writes
(``set_display_rotation(degrees, hflip, vflip)``: turned ``degrees`` counter-clockwise,
then mirrored), which is also how FFmpeg's command line and players show such files
(all twelve cases below were compared with ``ffmpeg -autorotate`` when this was written).
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from stages.decode import Decode
from tests.media import encode_images

#: a grey picture whose every quarter turn and mirror differ (no symmetry)
STORED = np.full((48, 64), 60, np.uint8)
STORED[:12, :20] = 230
STORED[30:, 50:] = 140
STORED[20:26, :] = 100


def write_turned(path: Path, images: list[np.ndarray], degrees: int, hflip: bool = False, vflip: bool = False,
                 lossless: bool = True) -> Path:
    """``images`` (BGR or grey) stored as they are, with a display matrix that turns them
    ``degrees`` counter-clockwise and then mirrors them."""
    bgr = (np.dstack([image] * 3) if image.ndim == 2 else image for image in images)
    return encode_images(path, bgr, 25, {"qp": "0"} if lossless else {"crf": "18"}, turn=(degrees, hflip, vflip))


def displayed(image: np.ndarray, degrees: int, hflip: bool, vflip: bool) -> np.ndarray:
    out = np.rot90(image, degrees // 90)
    if hflip:
        out = out[:, ::-1]
    if vflip:
        out = out[::-1]
    return out


#: (degrees, hflip, vflip) written, and the picture expected: turns as players show them; a
#: mirrored matrix by the turn FFmpeg reads from it, without the mirror (see stages.sources.frame_filter)
ORIENTATIONS = [((d, False, False), (d, False, False)) for d in (0, 90, 180, 270)] + [
    ((0, True, False), (180, False, False)), ((90, False, True), (270, False, False))]


@pytest.mark.parametrize("written,shown", ORIENTATIONS)
def test_frames_come_upright(tmp_path: Path, written: tuple[int, bool, bool], shown: tuple[int, bool, bool]) -> None:
    clip = write_turned(tmp_path / "turned.mp4", [STORED] * 2, *written)
    expected = displayed(STORED, *shown)
    with Decode(uri=str(clip)) as source:
        frames = list(source.frames())
    assert len(frames) == 2
    for frame in frames:
        assert (frame.width, frame.height) == (expected.shape[1], expected.shape[0])
        grey = frame.image()[:, :, 1].astype(int)
        assert np.abs(grey - expected).mean() < 2.0  # lossless luma; BGR from limited range
        # the planes later stages scale and crop from are the upright ones too
        small = frame.resized(expected.shape[1] // 2, expected.shape[0] // 2, "bgr24")[:, :, 1].astype(int)
        assert np.abs(small - expected[::2, ::2]).mean() < 12.0


def test_autorotate_off_gives_the_stored_picture(tmp_path: Path) -> None:
    clip = write_turned(tmp_path / "turned.mp4", [STORED] * 2, 90)
    with Decode(uri=str(clip), autorotate=False) as source:
        frame = next(iter(source.frames()))
        assert (frame.width, frame.height) == (64, 48)
        assert np.abs(frame.image()[:, :, 1].astype(int) - STORED).mean() < 2.0


def _run(config: str, name: str, clip: Path, out: Path) -> None:
    graph = build_graph(parse_config(config, "p.yaml").get(name), "p.yaml")
    summary = run_pipeline(graph, [str(clip)], RunOptions(output_dir=out, handle_signals=False))
    assert summary.error is None


@pytest.mark.parametrize("degrees", [0, 90])
def test_decoded_frames_are_freed_after_a_run(tmp_path: Path, degrees: int) -> None:
    """Reading a frame's display matrix through PyAV's ``side_data`` kept most frames of a
    run alive; through ``rotation`` and the turning filters nothing is kept."""
    clip = write_turned(tmp_path / "turned.mp4", [np.roll(STORED, i, axis=1) for i in range(120)], degrees)
    config = "pipelines:\n  p:\n    stages:\n      - {name: decode, type: decode}\n      - {name: m, type: metadata}\n"
    gc.collect()
    before = sum(isinstance(o, av.VideoFrame) for o in gc.get_objects())
    _run(config, "p", clip, tmp_path / "out")
    gc.collect()
    assert sum(isinstance(o, av.VideoFrame) for o in gc.get_objects()) - before <= 2


def test_the_output_video_is_upright_and_carries_no_turn(tmp_path: Path) -> None:
    """The MP4 a pipeline writes holds the upright frames and no display matrix, so players
    show it as they showed the input; JSON Lines give the upright size."""
    clip = write_turned(tmp_path / "turned.mp4", [STORED] * 5, 270)
    config = """
pipelines:
  copy:
    stages:
      - {name: decode, type: decode}
      - {name: encode, type: encode}
      - {name: metadata, type: metadata}
"""
    _run(config, "copy", clip, tmp_path / "out")
    expected = displayed(STORED, 270, False, False)
    with av.open(str(tmp_path / "out" / "turned.mp4")) as written:
        frames = list(written.decode(video=0))
    assert len(frames) == 5
    assert all(f.rotation == 0 for f in frames)
    grey = frames[2].to_ndarray(format="bgr24")[:, :, 1].astype(int)
    assert grey.shape == expected.shape and np.abs(grey - expected).mean() < 6.0
    record = json.loads((tmp_path / "out" / "turned.jsonl").read_text().splitlines()[0])
    assert (record["width"], record["height"]) == (48, 64)


def test_faces_in_a_phone_video_are_found_as_in_the_upright_one(models_dir: Path, videos_dir: Path,
                                                                 tmp_path: Path) -> None:
    """The two-face clip stored on its side (turned clockwise, losslessly) with the matrix that
    turns it back, against the same clip stored upright: the face detector finds the same
    faces at the same places on every frame."""
    from stages.detect import Detect

    with av.open(str(videos_dir / "head-pose-face-detection-female-and-male.gif")) as gif:
        upright = [f.to_ndarray(format="bgr24") for _, f in zip(range(20), gif.decode(video=0))]
    plain = write_turned(tmp_path / "upright.mp4", upright, 0)
    phone = write_turned(tmp_path / "phone.mp4", [np.rot90(im, -1) for im in upright], 90)

    def boxes(clip: Path) -> list[np.ndarray]:
        model = str(models_dir / "mediapipe" / "face_detection_short_range.tflite")
        with Decode(uri=str(clip)) as source, Detect(model=model, decoder="blazeface") as detect:
            return [np.sort(detect(f).detections.xyxy, axis=0) for f in source.frames()]

    reference, turned = boxes(plain), boxes(phone)
    assert [len(b) for b in reference] == [2] * 20
    assert [len(b) for b in turned] == [2] * 20
    assert max(np.abs(a - b).max() for a, b in zip(reference, turned)) < 0.5
