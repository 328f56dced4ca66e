"""Decode's ``start_frame``: a source that starts at frame N delivers exactly frames N.. of the
whole source, numbered from N (video files seek to the keyframe before N and decode forward).
Also: inputs that are not video fail in one line, a stop interrupts a stream's open, and
``realtime`` sources deliver their frames at the stream's rate, evenly, as a camera does."""

from __future__ import annotations

import threading
import time
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from stages.decode import Decode
from stages.sources import SourceError
from tests.cluster.helpers import make_clip
from tests.live.helpers import quiet_stream
from tests.media import ClipSpec, picture_number, write_clip, write_numbered


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # B-frames (libx264 veryfast) and an IDR frame every 25 frames: starts fall between keyframes
    return make_clip(tmp_path_factory.mktemp("decode") / "clip.mp4", 80, size=(96, 64))


def frames(uri: str, **params) -> list[tuple[int, np.ndarray, float | None]]:
    with Decode(uri=uri, **params) as source:
        return [(f.seq, f.image().copy(), f.pts_time) for f in source.frames()]


def delivery_times(uri: str, count: int, **params) -> list[float]:
    """Seconds from the first of the first ``count`` frames of a ``realtime`` source to each."""
    times: list[float] = []
    with Decode(uri=uri, realtime=True, **params) as source:
        for _ in source.frames():
            times.append(time.monotonic())
            if len(times) == count:
                break
    return [t - times[0] for t in times]


def assert_paced(times: list[float], fps: float) -> None:
    """Frames at ``fps``: none early overall, and few gaps under a quarter of the frame interval
    (a busy machine delays a frame now and then, and the next one follows closely)."""
    gaps = np.diff(times)
    assert times[-1] >= 0.9 * len(gaps) / fps, times
    assert np.mean(gaps < 0.25 / fps) <= 0.2, np.round(gaps * 1000).tolist()


@pytest.mark.parametrize("start", [1, 24, 25, 26, 61, 79])
def test_video_starts_at_the_frame_asked(clip: Path, start: int) -> None:
    whole = frames(str(clip))
    part = frames(str(clip), start_frame=start)
    assert [s for s, _, _ in part] == list(range(start, 80))
    for (seq, img, t), (seq0, img0, t0) in zip(part, whole[start:]):
        assert np.array_equal(img, img0) and t == t0, seq


def test_video_start_past_the_end_delivers_nothing(clip: Path) -> None:
    assert frames(str(clip), start_frame=80) == []


#: (suffix, codec, B-frames): H.264 with a keyframe every 10 frames and B-frames, as far as each
#: container holds them; AVI and MPEG-PS also with the codecs they usually carry (open GOPs)
CONTAINERS = [("mp4", "libx264", 3), ("mkv", "libx264", 3), ("ts", "libx264", 3), ("flv", "libx264", 3),
              ("avi", "libx264", 3), ("avi", "mpeg4", 2), ("mpg", "libx264", 3), ("mpg", "mpeg2video", 2)]


@pytest.mark.parametrize(("suffix", "codec", "bframes"), CONTAINERS, ids=[f"{s}-{c}" for s, c, _ in CONTAINERS])
def test_every_container_starts_at_the_frame_asked(tmp_path: Path, suffix: str, codec: str, bframes: int) -> None:
    clip = write_numbered(tmp_path / f"clip.{suffix}", 30, fps=10, gop=10, codec=codec, bframes=bframes)
    for start in (1, 5, 9, 10, 13, 21, 25, 29):
        with Decode(uri=str(clip), start_frame=start) as source:
            got = [(f.seq, picture_number(f.image())) for f in source.frames()]
        assert got == [(n, n) for n in range(start, 30)], start


@pytest.mark.parametrize("fps", [24, 30, Fraction(30000, 1001)], ids=["24", "30", "29.97"])
def test_a_millisecond_time_base_starts_at_the_frame_asked(tmp_path: Path, fps: Fraction | int) -> None:
    clip = write_numbered(tmp_path / "clip.mkv", 310, fps=fps, gop=50)  # Matroska: times in whole ms
    for start in (100, 299, 300):
        with Decode(uri=str(clip), start_frame=start) as source:
            got = [(f.seq, picture_number(f.image())) for f in source.frames()]
        assert got == [(n, n) for n in range(start, 310)], start


@pytest.mark.parametrize("suffix", ["mp4", "mkv", "ts", "flv", "avi"])
def test_a_start_reads_the_file_from_the_keyframe_before_it(tmp_path: Path, suffix: str) -> None:
    clip = write_numbered(tmp_path / f"clip.{suffix}", 40, fps=10, gop=10)
    with Decode(uri=str(clip), start_frame=25) as source:
        packets = [u for u in source.units() if u is not None]
    assert len(packets) == 20  # frames 20 .. 39


@pytest.mark.parametrize("kind", ["video", "folder", "scene"])
def test_a_source_started_later_announces_the_frames_it_delivers(tmp_path: Path, clip: Path, kind: str) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(80):
        cv2.imwrite(str(folder / f"{i:02d}.png"), np.full((8, 8, 3), i, np.uint8))
    uri = {"video": str(clip), "folder": str(folder), "scene": "testsrc://bars?width=64&height=48&frames=80"}[kind]
    for start, left in ((30, 50), (79, 1), (90, 0)):
        with Decode(uri=uri, start_frame=start) as source:
            announced = source.total_frames
            delivered = sum(1 for _ in source.frames())
        assert (announced, delivered) == (left, left), start


def test_a_looping_source_starts_its_later_passes_at_the_beginning(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(5):
        cv2.imwrite(str(folder / f"{i:02d}.png"), np.full((8, 8, 3), i * 40, np.uint8))
    with Decode(uri=str(folder), start_frame=3, loop=True) as source:
        got = []
        for f in source.frames():
            got.append((f.seq, int(f.image()[0, 0, 0])))
            if len(got) == 7:
                break
    assert got == [(3, 120), (4, 160), (5, 0), (6, 40), (7, 80), (8, 120), (9, 160)]


def test_a_looping_video_says_which_units_start_a_new_decoder(tmp_path: Path) -> None:
    """A video opened again for its next pass decodes with a new decoder, whose FFmpeg threads
    the runtime hands to the decoder's priority rule; a folder's next pass decodes as before."""
    clip = make_clip(tmp_path / "clip.mp4", frames=5)
    with Decode(uri=str(clip), loop=True) as source:
        units = []
        for unit in source.units():
            units.append(unit)
            if len(units) == 13:
                break
    starts = [i for i, unit in enumerate(units) if source.starts_decoder(unit)]
    assert starts == [5, 11], starts  # after each pass of 5 packets
    assert not any(source.starts_decoder(u) for u in (None, "loop"))
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(2):
        cv2.imwrite(str(folder / f"{i}.png"), np.zeros((8, 8, 3), np.uint8))
    with Decode(uri=str(folder), loop=True) as images:
        units = [u for _, u in zip(range(5), images.units())]
    assert not any(images.starts_decoder(u) for u in units)


def test_a_folder_frame_record_names_its_image_and_skips_an_unreadable_one(tmp_path: Path) -> None:
    from stages.records import vapipe_record

    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("b.png", "a.jpg", "c.png"):
        cv2.imwrite(str(folder / name), np.full((8, 8, 3), 90, np.uint8))
    (folder / "bb.png").write_bytes(b"not an image")
    with Decode(uri=str(folder)) as source:
        records = [vapipe_record(f) for f in source.frames()]
        assert source.decode_errors == 1
    assert [(r["seq"], r["file"]) for r in records] == [(0, "a.jpg"), (1, "b.png"), (2, "c.png")]
    with Decode(uri="testsrc://bars?frames=1") as scene:
        assert "file" not in vapipe_record(next(iter(scene.frames())))


def test_a_folder_reads_jpegs_with_data_after_their_end_and_skips_ones_cut_short(tmp_path: Path) -> None:
    """Phones append data after a JPEG's end-of-image marker (a maker trailer, a Motion Photo's
    MP4): such a file is read.  One cut short in its picture data is skipped, also when an
    Exif thumbnail before the picture holds an end-of-image marker of its own."""
    from stages.records import vapipe_record

    folder = tmp_path / "images"
    folder.mkdir()
    noise = np.random.default_rng(3).integers(0, 256, (120, 160, 3), np.uint8)
    jpeg = cv2.imencode(".jpg", noise)[1].tobytes()
    thumb = cv2.imencode(".jpg", np.full((16, 16, 3), 90, np.uint8))[1].tobytes()
    exif = b"Exif\0\0" + thumb
    with_thumb = jpeg[:2] + b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif + jpeg[2:]
    (folder / "a.jpg").write_bytes(jpeg)
    (folder / "b.jpg").write_bytes(jpeg + b"\0\0SEFH" + b"x" * 100 + b"SEFT")
    (folder / "c.jpg").write_bytes(jpeg + b"\0\0\0\x18ftypmp42" + b"\0" * 64)
    (folder / "d.jpg").write_bytes(with_thumb)
    (folder / "e.jpg").write_bytes(jpeg[:len(jpeg) // 2])
    (folder / "f.jpg").write_bytes(with_thumb[:len(with_thumb) - 1000])
    assert cv2.imread(str(folder / "f.jpg")) is not None  # decoded, half grey
    with Decode(uri=str(folder)) as source:
        records = [vapipe_record(f) for f in source.frames()]
        assert source.decode_errors == 2
    assert [(r["seq"], r["file"]) for r in records] == [(0, "a.jpg"), (1, "b.jpg"), (2, "c.jpg"), (3, "d.jpg")]


def test_synthetic_scene_starts_at_the_frame_asked() -> None:
    uri = "testsrc://bars?width=64&height=48&frames=12"
    whole = frames(uri)
    part = frames(uri, start_frame=7)
    assert [s for s, _, _ in part] == list(range(7, 12))
    assert all(np.array_equal(a[1], b[1]) and a[2] == b[2] for a, b in zip(part, whole[7:]))


def test_a_text_file_is_not_taken_for_a_video(tmp_path: Path) -> None:
    from stages.sources import SourceError

    notes = tmp_path / "README.txt"
    notes.write_text("camera 3: north gate\n" * 20)
    source = Decode(uri=str(notes))
    with pytest.raises(SourceError, match=rf"^source {notes} is a text file, not a video .*; valid: a video file"):
        source.open()
    source.close()


def test_a_url_of_a_protocol_ffmpeg_lacks_names_the_valid_schemes() -> None:
    source = Decode(uri="foo://camera/1")
    with pytest.raises(SourceError, match=r"^cannot open source foo://camera/1: Protocol not found; "
                                          r"valid: rtsp://, .*http://, .*file://, testsrc://$"):
        source.open()
    source.close()


def test_a_stop_while_a_live_stream_opens_ends_its_units_at_once(tmp_path: Path) -> None:
    client_closed, done = threading.Event(), threading.Event()
    url = quiet_stream(b"", client_closed, done)  # answers the request, then sends nothing
    source = Decode(uri=url, live=True, open_timeout_s=3)
    source.open()
    ended = threading.Event()
    reader = threading.Thread(target=lambda: (list(source.units()), ended.set()), daemon=True)
    try:
        reader.start()
        time.sleep(0.5)  # inside the open (open timeout 3 s)
        t0 = time.monotonic()
        source.stop_event.set()
        assert ended.wait(2) and time.monotonic() - t0 < 0.5
        assert not client_closed.is_set()  # the open goes on, out of reach of the stop
        assert client_closed.wait(6)  # and gives up at its timeout
    finally:
        done.set()
        source.close()


def test_frames_outside_the_runtime_are_named_as_the_runtime_names_their_source(clip: Path) -> None:
    with Decode(uri=str(clip)) as source:
        assert next(source.frames()).source_id == clip.stem
    with Decode(uri="testsrc://bars?frames=2") as source:
        assert {f.source_id for f in source.frames()} == {"bars"}


def test_every_decoder_frame_carries_its_time_base_the_drained_last_ones_too(clip: Path) -> None:
    with av.open(str(clip)) as container:
        time_base = container.streams.video[0].time_base
        count = sum(1 for _ in container.decode(video=0))
    with Decode(uri=str(clip)) as source:
        bases = [f.av_frame.time_base for f in source.frames()]
    assert len(bases) == count and set(bases) == {time_base}


@pytest.mark.parametrize("kind", ["video", "folder", "scene"])
def test_a_frames_iterator_kept_after_close_ends_and_a_new_one_starts_again(tmp_path: Path, clip: Path,
                                                                            kind: str) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(5):
        cv2.imwrite(str(folder / f"{i}.png"), np.full((8, 8, 3), 40 * i, np.uint8))
    uri = {"video": str(clip), "folder": str(folder), "scene": "testsrc://bars?frames=5"}[kind]
    source = Decode(uri=uri)
    old = source.frames()
    assert [next(old).seq, next(old).seq] == [0, 1]
    source.close()
    assert list(old) == []  # the pass that close() ended, without an error
    again = source.frames()
    assert next(again).seq == 0
    source.close()


def test_an_fps_a_video_does_not_use_is_named_once(clip: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="vapipe.source"):
        source = Decode(uri=str(clip), fps=5, loop=True)
        frames = source.frames()
        for _ in range(300):  # past the end of the clip: the loop opens it again
            next(frames)
        source.close()
        with Decode(uri="testsrc://bars?frames=2", fps=5) as scene:  # a scene takes it
            assert len(list(scene.frames())) == 2
    assert [r.getMessage() for r in caplog.records] == [
        f"decode: fps 5 is not used for {clip}: a video or stream keeps its own timestamps (fps sets the rate of "
        "image folders and testsrc scenes)"]


@pytest.mark.parametrize("container", ["mp4", "mkv"])
def test_a_realtime_video_with_b_frames_delivers_its_frames_evenly(tmp_path: Path, container: str) -> None:
    """B-frames are read before the frames they come between (3 with x264's default): paced by
    decode order, not by presentation time, which would send them in bursts of 4."""
    spec = ClipSpec(width=64, height=48, fps=50, frames=60, gop=25, scene="bars", container=container)
    clip = write_clip(tmp_path / spec.file_name(), spec)
    assert_paced(delivery_times(str(clip), 30), 50)


@pytest.mark.parametrize("kind", ["folder", "scene"])
def test_a_looping_realtime_source_paces_every_pass(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(5):
        cv2.imwrite(str(folder / f"{i}.png"), np.full((8, 8, 3), 40 * i, np.uint8))
    uri = {"folder": str(folder), "scene": "testsrc://bars?width=64&height=48&frames=5"}[kind]
    assert_paced(delivery_times(uri, 20, fps=50, loop=True), 50)


def shifted_ts(path: Path, source: Path, seconds: float) -> Path:
    """A copy of the MPEG-TS file ``source`` with timestamps ``seconds`` later."""
    with av.open(str(source)) as src, av.open(str(path), "w", format="mpegts") as out:
        stream = out.add_stream_from_template(src.streams.video[0])
        shift = round(seconds / src.streams.video[0].time_base)
        for packet in src.demux(video=0):
            if packet.size:
                packet.pts += shift
                packet.dts += shift
                packet.stream = stream
                out.mux(packet)
    return path


def test_a_realtime_stream_stays_paced_when_its_timestamps_go_back_or_jump(tmp_path: Path) -> None:
    """Concatenated MPEG-TS segments of 20 frames: their timestamps go back to the start, jump
    5 s ahead, go back again; each time the schedule starts again a frame after the frame before."""
    segment = write_clip(tmp_path / "a.ts", ClipSpec(width=64, height=48, fps=50, frames=20, gop=10, scene="bars",
                                                     container="ts"))
    later = shifted_ts(tmp_path / "b.ts", segment, 5.0)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(segment.read_bytes() * 2 + later.read_bytes() + segment.read_bytes())
    times = delivery_times(str(joined), 70)
    assert_paced(times, 50)
    assert times[-1] < 69 / 50 + 1.0, times
