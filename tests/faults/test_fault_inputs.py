"""Damaged and wrong inputs through the real command line.

Every case ends within a timeout with either a normal run whose damage is
counted (``decode_errors`` in the summary) or exit != 0 and one line on
stderr naming what is wrong; never a traceback.

Decisions:

* A truncated MP4 whose index ('moov') comes first is a normal run: every
  frame before the cut is processed, the outputs are complete, exit 0; the
  frames the index announces that never came are counted (``missing_frames``)
  and one warning says the file was cut short.  One whose index was cut off
  cannot be opened: one line naming the file and the missing index, exit 1.
* Damaged data in the middle of a video is concealed by the decoder: the
  affected frames are still passed on and counted as ``decode_errors``; frames
  after the damage are processed normally.
* An unreadable image in a folder is skipped and counted as a decode error.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest

from stages.sources.base import SourceError
from stages.sources.video import VideoReader
from tests.media import write_images

from .helpers import (INDEX_AT_END, INDEXED, cli_env, copy_clip, corrupted_copy,
                      one_error_line, read_jsonl, succeeded, summary, truncated_copy, vapipe, video_frames)


@pytest.fixture
def env(models_dir: Path) -> dict[str, str]:
    return cli_env(models_dir)


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first five pictures of the synthetic clip as JPEG files."""
    folder = tmp_path_factory.mktemp("images")
    write_images(folder, INDEXED, 5)
    return folder


def with_bad_image(good: Path, dst: Path, name: str, data: bytes) -> Path:
    """A copy of the folder ``good`` plus one unreadable image ``name`` (sorted among the good ones)."""
    dst.mkdir()
    for f in good.iterdir():
        shutil.copyfile(f, dst / f.name)
    (dst / name).write_bytes(data)
    return dst


# videos ---------------------------------------------------------------------------------------
def test_truncated_mp4_processes_every_frame_before_the_cut(env, tmp_path: Path, make_clip) -> None:
    clip = truncated_copy(make_clip(INDEXED), tmp_path / "cut.mp4", 0.6)
    out = tmp_path / "out"
    proc = succeeded(vapipe(env, "run", "faces", "--source", clip, "--output", out, "--json", "--no-progress"))
    src = summary(proc)["sources"][0]
    assert summary(proc)["error"] is None and src["error"] is None
    # 60 % of the bytes hold a bit more than half of the frames (the index is at the start)
    assert 0.45 * INDEXED.frames < src["frames"] < 0.65 * INDEXED.frames, src
    assert src["frames"] == src["decoded"]
    assert src["missing_frames"] == INDEXED.frames - src["decoded"]
    # no traceback, no noise from the decoders: one warning naming the source and the count
    assert proc.stderr.splitlines() == [f"WARNING vapipe: source 'cut' ended after {src['decoded']} of the "
                                        f"{INDEXED.frames} frames it announced (file cut short?)"]
    records = read_jsonl(out / "cut.jsonl")
    assert [r["seq"] for r in records] == list(range(src["frames"]))
    frames = video_frames(out / "cut.mp4")
    assert len(frames) == len(records)
    # the MP4 ends where the JSON Lines end (same span of source time)
    span_mp4 = float(frames[-1].pts * frames[-1].time_base) - float(frames[0].pts * frames[0].time_base)
    span_jsonl = records[-1]["pts_time"] - records[0]["pts_time"]
    assert span_mp4 == pytest.approx(span_jsonl, abs=0.05)


def test_truncated_mp4_without_its_index_is_one_line(env, tmp_path: Path, make_clip) -> None:
    clip = truncated_copy(make_clip(INDEX_AT_END), tmp_path / "no-index.mp4", 0.6)
    line = one_error_line(vapipe(env, "run", "persons", "--source", clip, "--output", tmp_path / "out"))
    assert str(clip) in line and "no index ('moov' box)" in line, line


def test_corrupted_mp4_counts_decode_errors_and_goes_on(env, tmp_path: Path, make_clip) -> None:
    clip = corrupted_copy(make_clip(INDEXED), tmp_path / "damaged.mp4", at=0.5, nbytes=4096, seed=1234)
    out = tmp_path / "out"
    proc = succeeded(vapipe(env, "run", "persons", "--source", clip, "--output", out, "--json", "--no-progress"))
    assert proc.stderr == ""  # no traceback, no noise from the decoders
    src = summary(proc)["sources"][0]
    assert src["error"] is None
    assert src["decode_errors"] >= 1, src
    assert src["missing_frames"] == 0  # damaged frames are concealed, not missing
    records = read_jsonl(out / "damaged.jsonl")
    assert len(records) == src["frames"] >= INDEXED.frames - 10
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(seqs) and seqs[-1] >= INDEXED.frames - 10  # frames after the damage were processed
    assert records[-1]["pts_time"] > 0.9 * records[-1]["seq"] / INDEXED.fps


def test_text_file_named_mp4_is_one_line(env, tmp_path: Path) -> None:
    fake = tmp_path / "notes.mp4"
    fake.write_text("these are meeting notes, not a video\n" * 50, encoding="utf-8")
    line = one_error_line(vapipe(env, "run", "persons", "--source", fake, "--output", tmp_path / "out"))
    assert str(fake) in line and "cannot open" in line


# Noise that FFmpeg's probe misreads: seed 37 reads as an H.263 stream with no picture
# size, seed 131 as an LRC subtitle file; seed 0 it rejects outright.
@pytest.mark.parametrize("seed", [0, 37, 131])
def test_noise_is_rejected_at_once_naming_the_source(tmp_path: Path, seed: int) -> None:
    noise = tmp_path / f"noise{seed}.mp4"
    noise.write_bytes(random.Random(seed).randbytes(200_000))
    started = time.monotonic()
    with pytest.raises(SourceError) as raised:
        VideoReader(str(noise), timeouts=(5.0, 5.0))
    message = str(raised.value)
    assert time.monotonic() - started < 2.0, message
    assert str(noise) in message and "timeout" not in message, message
    assert "Invalid data found" in message or "has no video stream" in message, message


def test_missing_file_is_one_line(env, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "clip.mp4"
    line = one_error_line(vapipe(env, "run", "faces", "--source", missing, "--output", tmp_path / "out"))
    assert str(missing) in line and "not found" in line


def test_missing_file_next_to_a_good_one_is_one_line(env, tmp_path: Path, make_clip) -> None:
    good = copy_clip(make_clip(INDEXED), tmp_path / "good.mp4")
    missing = tmp_path / "missing.mp4"
    line = one_error_line(vapipe(env, "run", "persons", "--source", good, "--source", missing,
                                 "--output", tmp_path / "out", "--max-frames", "5"))
    assert str(missing) in line


def test_an_output_that_is_the_source_is_refused_and_the_source_kept(env, tmp_path: Path, make_clip) -> None:
    """--output the folder the clip is in: faces would write {output}/clip.mp4 over the clip it reads."""
    clip = copy_clip(make_clip(INDEXED), tmp_path / "clip.mp4")
    before = clip.read_bytes()
    line = one_error_line(vapipe(env, "run", "faces", "--source", clip, "--output", tmp_path, "--max-frames", "5"))
    assert f"output {clip} is the source being read" in line, line
    assert clip.read_bytes() == before


def test_a_camera_password_is_never_shown_or_written(env, tmp_path: Path) -> None:
    from tests.live.helpers import free_port

    url = f"rtsp://admin:s3cr3t@127.0.0.1:{free_port()}/cam"  # nothing listens there
    proc = vapipe(env, "run", "faces", "--source", url, "--output", tmp_path / "out", "--json",
                  "--set", "decode.reconnect.max_attempts=1")
    assert proc.returncode == 1 and "gave up on rtsp://***@127.0.0.1:" in proc.stderr, proc.stderr
    written = [p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and "reason" in written[0]  # the source's events were written, without the password
    assert all("s3cr3t" not in text for text in [proc.stdout, proc.stderr, *written])


# image folders -----------------------------------------------------------------------------------
def test_corrupt_image_in_a_folder_is_a_counted_skip(env, tmp_path: Path, image_folder: Path) -> None:
    folder = with_bad_image(image_folder, tmp_path / "shots", "frame_002b.jpg", b"garbage, not an image " * 40)
    out = tmp_path / "out"
    proc = succeeded(vapipe(env, "run", "persons", "--source", folder, "--output", out, "--json",
                            "--no-progress"))
    assert proc.stderr == ""
    src = summary(proc)["sources"][0]
    assert src["decode_errors"] == 1 and src["frames"] == 5 and src["error"] is None, src
    records = read_jsonl(out / "shots.jsonl")
    assert [r["seq"] for r in records] == list(range(5))
    assert all((r["width"], r["height"]) == (INDEXED.width, INDEXED.height) for r in records)


def test_truncated_jpeg_in_a_folder_is_a_quiet_counted_skip(env, tmp_path: Path, image_folder: Path) -> None:
    whole = (image_folder / "frame_000.jpg").read_bytes()
    folder = with_bad_image(image_folder, tmp_path / "shots", "frame_002b.jpg", whole[:len(whole) // 2])
    proc = succeeded(vapipe(env, "run", "persons", "--source", folder, "--output", tmp_path / "out", "--json",
                            "--no-progress"))
    src = summary(proc)["sources"][0]
    assert proc.stderr == ""
    assert src["decode_errors"] == 1 and src["frames"] == 5, src


# models --------------------------------------------------------------------------------------------
def test_wrong_model_path_is_one_line_naming_it(env, tmp_path: Path, image_folder: Path) -> None:
    bad = tmp_path / "models" / "pose_detection.tflite"
    line = one_error_line(vapipe(env, "run", "persons", "--source", image_folder, "--output", tmp_path / "out",
                                 "--set", f"person_detect.model={bad}"))
    assert str(bad) in line and "not found" in line


def test_text_file_as_model_is_one_line(env, tmp_path: Path, image_folder: Path) -> None:
    bad = tmp_path / "detector.onnx"
    bad.write_text("not a network\n" * 10, encoding="utf-8")
    line = one_error_line(vapipe(env, "run", "persons", "--source", image_folder, "--output", tmp_path / "out",
                                 "--set", f"person_detect.model={bad}"))
    assert str(bad) in line and "ONNX" in line


@pytest.mark.parametrize("model, expected", [
    # a recognition model (dynamic input, sequence output) behind the pose detector's decoder
    ("ppocr/ch_PP-OCRv4_rec_infer.onnx", "outputs [?,?,6625] do not fit decoder 'pose' (it reads [1,2254,12]"),
    # a landmark model (one crop in, 1404 values out) behind the pose detector's decoder
    ("mediapipe/face_landmark.tflite", "do not fit decoder 'pose' (it reads [1,2254,12] regressors and [1,2254,1] "
                                       "scores); decoders that fit: none"),
])
def test_model_that_does_not_fit_the_decoder_is_one_line(env, tmp_path: Path, image_folder: Path,
                                                        models_dir: Path, model: str, expected: str) -> None:
    path = models_dir / model
    line = one_error_line(vapipe(env, "run", "persons", "--source", image_folder, "--output", tmp_path / "out",
                                 "--set", f"person_detect.model={path}"))
    assert str(path) in line and expected in line


def test_text_detection_decoder_on_a_face_detector_is_one_line(env, tmp_path: Path, image_folder: Path,
                                                               models_dir: Path) -> None:
    path = models_dir / "mediapipe/face_detection_short_range.tflite"
    line = one_error_line(vapipe(env, "run", "persons", "--source", image_folder, "--output", tmp_path / "out",
                                 "--set", f"person_detect.model={path}", "--set", "person_detect.decoder=db_text"))
    assert line.endswith("outputs regressors [1,896,16], classificators [1,896,1] do not fit decoder 'db_text' "
                         "(it reads one [N,1,H,W] probability map); decoders that fit: blazeface"), line


def test_a_region_decoder_feeding_another_input_size_is_one_line(env, tmp_path: Path, image_folder: Path) -> None:
    """The text direction decoder (48x192 crops of the ticker's text) on the face mesh (192x192):
    OpenVINO's own several-line exception becomes its one informative line."""
    line = one_error_line(vapipe(env, "run", "ocr", "--source", image_folder, "--output", tmp_path / "out",
                                 "--no-progress", "--set", "direction.model=mediapipe/face_landmark"))
    assert line.startswith("vapipe: error: stage 'direction' on source ") and line.endswith("are incompatible"), line
    assert "src/" not in line


def test_detector_decoder_on_a_detector_with_other_outputs_is_one_line(env, tmp_path: Path,
                                                                       image_folder: Path) -> None:
    """BlazeFace's decoder on the pose detector: both are SSD models, with 16 vs 12 values per anchor;
    found when the model loads, with the decoder that fits."""
    line = one_error_line(vapipe(env, "run", "faces", "--source", image_folder, "--output", tmp_path / "out",
                                 "--set", "face_detect.model=mediapipe/pose_detection"))
    assert "pose_detection.tflite" in line and "(it reads [1,896,16] regressors and [1,896,1] scores)" in line
    assert line.endswith("decoders that fit: pose"), line
    assert "'face_detect'" in line


def test_region_decoder_on_a_detector_is_one_line(env, tmp_path: Path, clip: Path) -> None:
    """The face-mesh decoder on the pose detector.  It only runs once a face was found:
    with a score threshold of 0 the face detector reports boxes on any picture."""
    line = one_error_line(vapipe(env, "run", "faces", "--source", clip, "--output",
                                 tmp_path / "out", "--max-frames", "10",
                                 "--set", "face_detect.options={score_threshold: 0.0}",
                                 "--set", "landmarks.model=mediapipe/pose_detection"))
    assert "pose_detection.tflite" in line and "expected outputs of 1404 and 1 values" in line
    assert "'landmarks'" in line

