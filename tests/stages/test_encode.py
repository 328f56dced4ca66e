"""Encode sink: playable files, exact frame counts, faithful timestamps."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from pipeline.stage import StageError
from stages.encode import Encode
from tests.media import CLIP

TB = Fraction(1, 12_800)  # a typical MP4 time base
TICKS_PER_FRAME = 512  # 25 frames/s at TB


def make_stage(tmp_path: Path, source: str = "cam/1", **params) -> Encode:
    stage = Encode(**params)
    stage.source_id = source
    stage.output_dir = tmp_path
    return stage


def synthetic(i: int, w: int = 160, h: int = 120, pts: int | None = None, tb: Fraction | None = TB,
              source: str = "cam/1") -> Frame:
    img = np.zeros((h, w, 3), np.uint8)
    img[:, :, 0] = (i * 7) % 256
    img[: h // 2, : w // 2, 1] = 200
    return Frame.from_image(img, source, i, pts=pts, time_base=tb if pts is not None else None)


class Info:
    """What the tests need from a stream, read while the file is open."""

    def __init__(self, stream) -> None:
        self.width, self.height = stream.width, stream.height
        self.duration = float(stream.duration * stream.time_base) if stream.duration else None


def decode(path: Path) -> tuple[list[av.VideoFrame], Info]:
    """Every frame of the file (decoding to the end proves it is complete and playable)."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        frames = list(c.decode(stream))
        return frames, Info(stream)


def times(frames: list[av.VideoFrame]) -> np.ndarray:
    return np.array([float(f.pts * f.time_base) for f in frames])


def test_frame_count_size_and_timestamps(tmp_path: Path) -> None:
    n, start = 40, 90_000
    stage = make_stage(tmp_path)
    inputs = [synthetic(i, pts=start + i * TICKS_PER_FRAME) for i in range(n)]
    with stage:
        for f in inputs:
            assert stage(f) is f  # sinks pass frames on
    assert stage.frames_written == n
    assert stage.path == tmp_path / "cam_1.mp4" and stage.path.is_file()
    frames, stream = decode(stage.path)
    assert len(frames) == n
    assert (stream.width, stream.height) == (160, 120)
    t = times(frames)
    assert np.all(np.diff(t) > 0)
    expected = np.array([f.pts_time for f in inputs]) - inputs[0].pts_time
    np.testing.assert_allclose(t - t[0], expected, atol=0.5 / 25)
    assert abs(t[0]) < 1 / 25  # re-based to start at 0
    assert stream.duration is not None and abs(stream.duration - n / 25) < 1.5 / 25
    # the picture survives: top-left quadrant is green-ish, the rest is not
    img = frames[5].to_ndarray(format="bgr24")
    assert img[10:50, 10:70, 1].mean() > 150 and img[80:, 100:, 1].mean() < 60


def test_frames_made_by_hand_that_all_keep_seq_0_are_a_frame_interval_apart(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``Frame.from_image(image)`` numbers every frame 0 unless told: 25 frames must make a
    second of video at 25 fps, not 25 ticks of the 90 kHz clock, and the log says why."""
    stage = make_stage(tmp_path)
    with caplog.at_level("WARNING"), stage:
        for i in range(25):
            stage(Frame.from_image(synthetic(i).image(), "cam/1"))  # seq 0 each time
    frames, _ = decode(stage.path)
    np.testing.assert_allclose(np.diff(times(frames)), 1 / 25, atol=0.002)
    assert len(frames) == 25
    assert [r.getMessage() for r in caplog.records if "repeat seq" in r.getMessage()] == [
        "encode: frames without timestamps repeat seq 0; each is written 0.04 s after the last "
        "(number them: Frame.from_image(image, source_id, seq))"]

def test_variable_timestamps_are_followed(tmp_path: Path) -> None:
    pts = np.cumsum([0, 300, 900, 450, 2000, 512, 512, 3000])
    stage = make_stage(tmp_path)
    with stage:
        for i, p in enumerate(pts):
            stage(synthetic(i, pts=int(p)))
    frames, _ = decode(stage.path)
    np.testing.assert_allclose(times(frames), pts * float(TB), atol=1e-4)


def test_duplicate_and_backward_timestamps_stay_monotonic(tmp_path: Path) -> None:
    # repeated pts, a slightly early pts, then a restart (jump back by seconds)
    pts = [0, 512, 512, 1024, 900, 1536, 100_000, 100_512, 0, 512, 1024]
    stage = make_stage(tmp_path)
    with stage:
        for i, p in enumerate(pts):
            stage(synthetic(i, pts=p))
    frames, _ = decode(stage.path)
    assert len(frames) == len(pts)
    t = times(frames)
    assert np.all(np.diff(t) > 0)
    # after the restart the stream continues one nominal interval after the last frame
    assert t[8] == pytest.approx(t[7] + 1 / 25, abs=1e-3)
    assert t[9] - t[8] == pytest.approx(512 / 12_800, abs=1e-3)


def test_without_timestamps_uses_seq_and_fps(tmp_path: Path) -> None:
    stage = make_stage(tmp_path, fps=10)
    seqs = [5, 6, 7, 9, 10]  # seq 8 was dropped upstream
    with stage:
        for s in seqs:
            stage(synthetic(s))
    frames, stream = decode(stage.path)
    assert len(frames) == len(seqs)
    np.testing.assert_allclose(times(frames), [0, 0.1, 0.2, 0.4, 0.5], atol=1e-3)


def test_odd_size_is_padded(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    with stage:
        for i in range(5):
            stage(synthetic(i, w=161, h=121, pts=i * TICKS_PER_FRAME))
    frames, stream = decode(stage.path)
    assert len(frames) == 5
    assert (stream.width, stream.height) == (162, 122)


def test_size_change_mid_stream_is_scaled(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    with stage:
        stage(synthetic(0, pts=0))
        f = synthetic(1, w=320, h=240, pts=512)
        f.detections = Detections(xyxy=[[10, 10, 300, 200]], score=[0.5], label=["car"])
        stage(f)
        stage(synthetic(2, pts=1024))
    frames, stream = decode(stage.path)
    assert len(frames) == 3 and (stream.width, stream.height) == (160, 120)


def test_annotation_drawn_on_a_copy(tmp_path: Path) -> None:
    img = np.zeros((120, 160, 3), np.uint8)
    frame = Frame.from_image(img, "cam", 0, pts=0, time_base=TB)
    frame.detections = Detections(xyxy=[[40, 40, 120, 100]], score=[0.9], label=["face"])
    stage = make_stage(tmp_path)
    with stage:
        stage(frame)
    assert not img.any(), "the frame's own pixels must stay untouched"
    assert frame.image() is img
    out = decode(stage.path)[0][0].to_ndarray(format="bgr24")
    assert out[38:43, 60:100].max() > 100  # top edge of the box
    assert out[60:80, 60:100].max() < 40 and out[110:, :30].max() < 40

    plain = make_stage(tmp_path, path="{output}/plain.mp4", annotate=False)
    with plain:
        plain(frame)
    assert decode(plain.path)[0][0].to_ndarray(format="bgr24").max() < 40


def _boxed_decoder_frames(count: int, w: int = 320, h: int = 240) -> list[Frame]:
    """Decoder frames (yuv420p) of a dark picture with a bright 80x60 block at (160, 120), each
    with a detection on the block."""
    img = np.full((h, w, 3), 30, np.uint8)
    img[120:180, 160:240] = 220
    frames = []
    for i in range(count):
        vf = av.VideoFrame.from_ndarray(img, format="bgr24").reformat(format="yuv420p")
        f = Frame(source_id="cam", seq=i, width=w, height=h, pts=i * TICKS_PER_FRAME, time_base=TB, av_frame=vf)
        f.detections = Detections(xyxy=[[160, 120, 240, 180]], score=[0.9], label=["car"])
        frames.append(f)
    return frames


@pytest.mark.parametrize("annotate", [True, False])
def test_written_at_the_size_asked(tmp_path: Path, annotate: bool) -> None:
    """``height`` alone: the width follows (320x240 -> 160x120); the picture is scaled and the
    box drawn where the object is in the scaled picture; the frames themselves keep their size."""
    stage = make_stage(tmp_path, height=120, annotate=annotate)
    frames = _boxed_decoder_frames(4)
    with stage:
        for f in frames:
            stage(f)
    assert all((f.width, f.height, f.av_frame.width) == (320, 240, 320) for f in frames)
    written, stream = decode(stage.path)
    assert len(written) == 4 and (stream.width, stream.height) == (160, 120)
    out = written[1].to_ndarray(format="bgr24").astype(int)
    assert out[65:85, 85:115].min() > 170 and out[:50, :50].max() < 60  # the block, scaled
    box_row = out[58:62, 85:115].max(axis=(0, 2)).min()  # the box's top edge at y = 60
    assert (box_row > 100) if annotate else (out[52:58, 85:115].max() < 60)


def test_width_and_height_both_set_and_an_odd_result(tmp_path: Path) -> None:
    stage = make_stage(tmp_path, width=101, height=75)
    with stage:
        for f in _boxed_decoder_frames(2):
            stage(f)
    _, stream = decode(stage.path)
    assert (stream.width, stream.height) == (102, 76)
    assert Encode(height=720)._file_size((3840, 2160)) == (1280, 720)
    assert Encode(width=1000)._file_size((1920, 1080)) == (1000, 562)
    # scaled from the decoder's picture: the runtime need not convert full-size frames for it
    assert Encode().needs_image and not Encode(height=720).needs_image


def test_close_twice_and_close_without_frames(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    stage.ensure_open()
    stage.close()
    stage.close()
    assert not list(tmp_path.iterdir()), "no frames, no file"

    stage = make_stage(tmp_path)
    with stage:
        for i in range(3):
            stage(synthetic(i, pts=i * TICKS_PER_FRAME))
    stage.close()
    stage.close()
    assert len(decode(stage.path)[0]) == 3


def test_exception_in_user_loop_leaves_playable_file(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with stage:
            for i in range(12):
                if i == 7:
                    raise RuntimeError("boom")
                stage(synthetic(i, pts=i * TICKS_PER_FRAME))
    frames, _ = decode(stage.path)
    assert len(frames) == 7 == stage.frames_written


def test_exception_inside_stage_then_close(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    stage.ensure_open()
    for i in range(4):
        stage(synthetic(i, pts=i * TICKS_PER_FRAME))
    broken = Frame(source_id="cam/1", seq=4, width=160, height=120, pts=4 * TICKS_PER_FRAME, time_base=TB)
    with pytest.raises(ValueError, match="no pixels"):
        stage(broken)
    stage(synthetic(5, pts=5 * TICKS_PER_FRAME))  # the stage keeps working after a bad frame
    stage.close()  # what the runtime's shutdown path does
    frames, _ = decode(stage.path)
    assert len(frames) == 5 == stage.frames_written
    assert np.all(np.diff(times(frames)) > 0)


def test_close_during_process_is_deferred(tmp_path: Path) -> None:
    """A close() that interrupts process() (signal handler) finalises right after it."""
    stage = make_stage(tmp_path)

    class CloseWhileDrawing:
        def annotate(self, image, detections):
            stage.close()
            return image

    stage.annotators = [CloseWhileDrawing()]
    stage.ensure_open()
    for i in range(3):
        f = synthetic(i, pts=i * TICKS_PER_FRAME)
        f.detections = Detections(xyxy=[[1, 1, 5, 5]], score=[1.0], label=["x"])
        stage(f)
    frames, _ = decode(stage.path)
    assert len(frames) == 1 and stage.frames_written == 1
    # frames after close pass through without touching the finished file
    late = synthetic(9, pts=9 * TICKS_PER_FRAME)
    assert stage(late) is late
    assert len(decode(stage.path)[0]) == 1
    stage.close()


def test_reopen_starts_a_new_file(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    for run in (3, 2):
        with stage:
            for i in range(run):
                stage(synthetic(i, pts=i * TICKS_PER_FRAME))
        assert len(decode(stage.path)[0]) == run == stage.frames_written


def test_a_frame_after_the_with_block_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    stage = make_stage(tmp_path)
    with stage:
        for i in range(3):
            stage(synthetic(i, pts=i * TICKS_PER_FRAME))
    late = synthetic(3, pts=3 * TICKS_PER_FRAME)
    assert stage(late) is late  # passed on unwritten, not a new file of one frame
    assert len(decode(stage.path)[0]) == 3 == stage.frames_written


def test_bad_codec_template_and_parameter_are_refused_when_the_stage_is_made() -> None:
    with pytest.raises(ValueError, match=r"^Encode: parameter 'codec': 'no-such-codec' is not a video encoder of "
                                         r"this FFmpeg; for example libx264, .*\(`ffmpeg -encoders` lists them\)"):
        Encode(codec="no-such-codec")
    with pytest.raises(ValueError, match=r"'aac' is not a video encoder"):
        Encode(codec="aac")  # an audio encoder
    with pytest.raises(ValueError, match=r"^Encode: parameter 'path': bad path template '\{output\}/\{camera\}\.mp4' "
                                         r"\(KeyError\('camera'\)\); valid fields: \{output\}, \{source\}, \{name\}"):
        Encode(path="{output}/{camera}.mp4")
    with pytest.raises(ValueError, match=r"unknown parameter 'bitrate'"):
        Encode(bitrate=5)


def test_decoder_frames_encoded_without_conversion(tmp_path: Path, clip: Path) -> None:
    stage = make_stage(tmp_path, source=clip.name, annotate=False)
    n = 30
    src_times = []
    with av.open(str(clip)) as c, stage:
        s = c.streams.video[0]
        for i, vf in enumerate(c.decode(s)):
            if i == n:
                break
            before = (vf.pts, vf.time_base)
            frame = Frame(source_id="car", seq=i, width=vf.width, height=vf.height, pts=vf.pts,
                          time_base=vf.time_base, av_frame=vf)
            stage(frame)
            assert (vf.pts, vf.time_base) == before, "the decoder frame's timing is restored"
            src_times.append(frame.pts_time)
            w, h = vf.width, vf.height
    frames, stream = decode(stage.path)
    assert len(frames) == n
    assert (stream.width, stream.height) == (w + w % 2, h + h % 2)
    np.testing.assert_allclose(times(frames), np.array(src_times) - src_times[0], atol=1e-3)


def test_the_frames_a_decoder_drains_at_the_end_are_encoded_from_the_decode_stage(tmp_path: Path, clip: Path) -> None:
    """The last frames of a clip with B-frames come from draining the decoder; passed on
    unconverted (nothing drawn), they are encoded like every other frame."""
    from stages.decode import Decode

    with Decode(uri=str(clip)) as source, Encode(path=str(tmp_path / "out.mp4")) as encoder:
        count = 0
        for frame in source.frames():
            encoder(frame)
            count += 1
    frames, _ = decode(tmp_path / "out.mp4")
    with av.open(str(clip)) as c:
        expected = sum(1 for _ in c.decode(video=0))
    assert count == len(frames) == expected


@pytest.mark.parametrize("fps", [10, 60])
def test_a_clip_encoded_on_its_own_keeps_its_duration(tmp_path: Path, make_clip, fps: int) -> None:
    """Without a runtime (no ``source_fps``), a 3 s clip is written as 3 s: the last frame is
    shown for the interval its timestamps show, not 1/25 s."""
    from stages.decode import Decode

    clip = make_clip(CLIP.with_(fps=fps, frames=3 * fps, gop=fps, scene="bars", width=96, height=64), stem="rate")
    with Decode(uri=str(clip)) as source, Encode(path=str(tmp_path / "out.mp4")) as encoder:
        for frame in source.frames():
            encoder(frame)
    frames, stream = decode(tmp_path / "out.mp4")
    assert list(times(frames)) == [i / fps for i in range(3 * fps)]
    assert stream.duration == 3.0


def test_a_short_clip_fed_again_continues_one_frame_interval_after_its_last_frame(tmp_path: Path, make_clip) -> None:
    """A source that starts again less than a second back (a 0.8 s clip fed three times into one
    file) is a restart, not jitter: each pass follows the last at the clip's frame interval."""
    from stages.decode import Decode

    clip = make_clip(CLIP.with_(frames=8, gop=8, scene="bars", width=96, height=64), stem="short")
    with Encode(path=str(tmp_path / "out.mp4")) as encoder:
        for _ in range(3):
            with Decode(uri=str(clip)) as source:
                for frame in source.frames():
                    encoder(frame)
    frames, stream = decode(tmp_path / "out.mp4")
    assert list(times(frames)) == [i / 10 for i in range(24)]
    assert stream.duration == 2.4


def test_encoder_with_16_bit_clock(tmp_path: Path) -> None:
    """MPEG-4 part 2 rejects a 90 kHz clock; the stage falls back to one it accepts."""
    stage = make_stage(tmp_path, codec="mpeg4")
    with stage:
        for i in range(6):
            stage(synthetic(i, pts=i * TICKS_PER_FRAME))
    frames, _ = decode(stage.path)
    assert len(frames) == 6
    np.testing.assert_allclose(times(frames), np.arange(6) / 25, atol=1e-3)


def test_close_from_another_thread(tmp_path: Path) -> None:
    import threading

    stage = make_stage(tmp_path)
    stage.ensure_open()
    started = threading.Event()

    def feed() -> None:
        for i in range(400):
            stage(synthetic(i, pts=i * TICKS_PER_FRAME))
            started.set()

    worker = threading.Thread(target=feed)
    worker.start()
    started.wait(5)
    stage.close()  # the runtime's shutdown path, while frames still arrive
    worker.join(10)
    frames, _ = decode(stage.path)
    assert 1 <= len(frames) == stage.frames_written


def test_sigterm_handler_closing_mid_stream(tmp_path: Path) -> None:
    """A process stopped by SIGTERM whose handler closes the stage leaves a playable file."""
    import signal
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import signal, sys
        from fractions import Fraction
        from pathlib import Path
        import numpy as np
        from pipeline.frame import Detections, Frame
        from stages.encode import Encode

        enc = Encode()
        enc.source_id, enc.output_dir = "cam", Path({str(tmp_path)!r})

        def stop(signum, _frame):
            enc.close()
            print("written", enc.frames_written, flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, stop)
        enc.ensure_open()
        i = 0
        while True:
            img = np.full((120, 160, 3), i % 256, np.uint8)
            f = Frame.from_image(img, "cam", i, pts=i * 3600, time_base=Fraction(1, 90000))
            f.detections = Detections(xyxy=[[10, 10, 80, 80]], score=[0.5], label=["face"])
            enc(f)
            i += 1
            if i == 20:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    written = int(out.split()[-1])
    frames, _ = decode(tmp_path / "cam.mp4")
    assert len(frames) >= 20 and abs(len(frames) - written) <= 1  # the interrupted frame may still land
    assert np.all(np.diff(times(frames)) > 0)


KILLED_WRITER = """
import os, sys
from fractions import Fraction
import numpy as np
from pipeline.frame import Frame
from stages.encode import Encode
stage = Encode(path=sys.argv[1], preset="ultrafast", container_options={
    "movflags": "+frag_keyframe+empty_moov+default_base_moof", "frag_duration": "200000", "flush_packets": "1"})
stage.open()
for i in range(50):
    stage(Frame.from_image(np.full((120, 160, 3), i * 4, np.uint8), "cam", i, pts=i * 512, time_base=Fraction(1, 12800)))
os._exit(0)  # killed: nothing closes the file
"""


def test_container_options_make_an_mp4_that_survives_a_killed_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "killed.mp4"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], check=True, cwd=root, timeout=120)
    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="gray") for f in container.decode(video=0)]
    # fragments of at most 0.2 s (5 frames) are written as they fill: all but the last ones play
    assert 40 <= len(frames) <= 50
    assert abs(float(frames[-1].mean()) - 4 * (len(frames) - 1)) < 6  # the frames kept are the first ones


def test_a_folder_in_the_way_of_the_file_fails_on_open_naming_it(tmp_path: Path) -> None:
    """The path is checked on open, before any frame: a run fails before another sink has
    written anything."""
    (tmp_path / "cam.mp4").mkdir()  # a directory in the way of the file
    stage = make_stage(tmp_path, source="cam", path="{output}/cam.mp4")
    with pytest.raises(StageError, match=r"^encode: output .*cam\.mp4 is a folder; give a file name"):
        stage.open()
    assert (tmp_path / "cam.mp4").is_dir() and not any((tmp_path / "cam.mp4").iterdir())


def test_container_options_the_muxer_refuses_fail_at_the_first_frame_and_leave_no_file(tmp_path: Path) -> None:
    """The header is written with the first frame, not a dozen frames later at the first packet."""
    stage = Encode(path=str(tmp_path / "out.mp4"), container_options={"movflags": "+no_such_flag"})
    with pytest.raises(StageError, match=r"^encode: the mp4 muxer refused movflags='\+no_such_flag' for .*out\.mp4: "):
        with stage:
            stage(synthetic(0))
    assert not (tmp_path / "out.mp4").exists()


def test_an_extension_ffmpeg_writes_no_container_for_is_one_line_and_leaves_no_file(tmp_path: Path) -> None:
    stage = Encode(path=str(tmp_path / "out.vid"))
    with pytest.raises(StageError, match=r"^encode: cannot write .*out\.vid: .* \(the container follows the file's "
                                         r"extension: \.mp4, \.mkv"):
        with stage:
            stage(synthetic(0))
    assert not (tmp_path / "out.vid").exists()


def test_a_preset_the_encoder_refuses_is_named_once_and_leaves_no_file(tmp_path: Path, capfd) -> None:
    stage = Encode(path=str(tmp_path / "out.mp4"), preset="superduper")
    with pytest.raises(StageError, match=r"^encode: 'libx264' refused crf='23', preset='superduper': Invalid argument$"):
        with stage:
            stage(synthetic(0))
    assert not (tmp_path / "out.mp4").exists()
    # the encoder's own complaint appears once, not once per output clock tried
    assert capfd.readouterr().err.count("invalid preset") <= 1


def test_two_sinks_on_one_path_are_refused_and_the_first_file_kept(tmp_path: Path) -> None:
    from stages.metadata import Metadata

    first = make_stage(tmp_path, source="cam", path="{output}/cam.mp4")
    other = make_stage(tmp_path, source="door", path="{output}/cam.mp4")
    records = Metadata(path=str(tmp_path / "cam.mp4"), format="json-lines")
    records.source_id = "cam"
    with first:
        first(synthetic(0, pts=0))
        with pytest.raises(StageError, match=r"^encode: .*cam\.mp4 is already written by stage 'encode' of "
                                             r"source 'cam'; give each output its own path"):
            with other:
                other(synthetic(0, pts=0))
        with pytest.raises(StageError, match=r"^metadata: .*cam\.mp4 is already written by stage 'encode'"):
            with records:
                records(synthetic(0, pts=0))
        first(synthetic(1, pts=TICKS_PER_FRAME))
    assert len(decode(first.path)[0]) == 2  # neither the other encoder nor the records touched it
    with other:  # once the first has finished, the path is free
        other(synthetic(0, pts=0))


def test_sinks_used_on_their_own_are_named_for_their_frames_source_and_never_share_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the runtime nobody sets a sink's source: the first frame names it, so
    ``{source}`` gives one file per camera; two sinks of one name given one path clash."""
    monkeypatch.chdir(tmp_path)
    door, yard = Encode(), Encode()  # the default path, output/{source}.mp4
    with door, yard:
        for i in range(3):
            door(synthetic(i, pts=i * TICKS_PER_FRAME, source="door"))
            yard(synthetic(i, pts=i * TICKS_PER_FRAME, source="yard cam"))
    assert door.path == Path("output/door.mp4") and yard.path == Path("output/yard_cam.mp4")
    assert len(decode(door.path)[0]) == len(decode(yard.path)[0]) == 3
    first, second = Encode(path="same.mp4"), Encode(path="same.mp4")
    with first, second:
        first(synthetic(0, pts=0, source="door"))
        with pytest.raises(StageError, match=r"^encode: same\.mp4 is already written by stage 'encode' of "
                                             r"source 'door'"):
            second(synthetic(0, pts=0, source="door"))
        first(synthetic(1, pts=TICKS_PER_FRAME, source="door"))
    assert len(decode(tmp_path / "same.mp4")[0]) == 2


def test_a_sink_never_writes_the_file_a_decode_stage_reads(tmp_path: Path, clip: Path) -> None:
    from stages.decode import Decode
    from stages.metadata import Metadata

    source = tmp_path / "in.mp4"
    source.write_bytes(clip.read_bytes())
    with Decode(uri=str(source)) as decoder:
        for sink in (Encode(path=str(source)), Metadata(path=str(source))):
            with pytest.raises(StageError, match=rf"output {source} is the source being read"):
                with sink:
                    sink(next(decoder.frames()))
    assert len(decode(source)[0]) == len(decode(clip)[0])  # the input is whole
    with Encode(path=str(source)) as sink:  # once the source closed, the file may be written
        sink(synthetic(0, pts=0))
    assert len(decode(source)[0]) == 1


def test_an_encoder_gets_a_pixel_format_it_takes_and_a_wrong_one_is_named_with_the_valid(tmp_path: Path) -> None:
    """MJPEG refuses the default yuv420p (limited range) unless told to be lax: it gets its own
    full-range format, as FFmpeg's tool picks it; a format the encoder lacks fails at once."""
    stage = make_stage(tmp_path, path="{output}/m.mkv", codec="mjpeg")
    assert stage.params.pix_fmt == "yuvj420p"
    with stage:
        for i in range(3):
            stage(synthetic(i, pts=i * TICKS_PER_FRAME))
    frames, info = decode(stage.path)
    assert len(frames) == 3 and frames[0].format.name == "yuvj420p"
    assert Encode(codec="mpeg4").params.pix_fmt == "yuv420p"
    with pytest.raises(ValueError, match=r"pix_fmt 'yuv444p' is not a format 'mpeg4' encodes; valid: yuv420p$"):
        Encode(codec="mpeg4", pix_fmt="yuv444p")
