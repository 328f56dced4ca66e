"""V4L2 cameras (``/dev/videoN``) end to end through the ``vapipe`` CLI and FFmpeg's
``video4linux2,v4l2`` demuxer, against a fake camera.

The camera is tests/live/fake_v4l2.c, preloaded (LD_PRELOAD) into the vapipe subprocess:
it makes /dev/video42 a V4L2 capture device in that process (QUERYCAP, formats, frame
rate, mmap buffers, QBUF/DQBUF at the camera's frame rate with monotonic capture
timestamps), sending a clip as raw YUYV 4:2:2 at 15 fps, in a loop: the synthetic clip
(tests/media.py), or the shared faces clip (480x270) where the test looks for faces.
Removing its marker file unplugs it (DQBUF fails with ENODEV, the path no longer
opens); creating the file again plugs in a camera again.  Every run is a subprocess
with a hard timeout.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from .helpers import (
    FakeCamera,
    event_states,
    finish,
    json_summary,
    read_jsonl,
    source_stats,
    vapipe,
    vapipe_popen,
    wait_for,
)

FPS = 15.0
FACES_PER_FRAME = 2  # the faces clip shows two people facing the camera throughout

CONFIG = """\
pipelines:
  events:
    stages:
      - {name: decode, type: decode}
      - {name: metadata, type: metadata}
"""


def _steps(times: list[float], period: float) -> list[float]:
    """Gaps between consecutive timestamps, in frame periods."""
    return [(b - a) / period for a, b in itertools.pairwise(times)]


def _run_camera(cam: FakeCamera, n: int, tmp_path: Path) -> tuple[dict, dict, list[dict], list[dict]]:
    """`vapipe run faces --source /dev/video42 --max-frames N --json`: (summary, source stats,
    frame records, event records)."""
    out = tmp_path / "out"
    proc = vapipe("run", "faces", "--source", cam.device, "--max-frames", str(n), "--output", str(out),
                  "--json", "--no-progress", timeout=60, env=cam.env())
    assert proc.returncode == 0, proc.stderr
    summary = json_summary(proc)
    frames, events = read_jsonl(out / f"{cam.name}.jsonl")
    assert (out / f"{cam.name}.mp4").stat().st_size > 0
    return summary, source_stats(summary, cam.name), frames, events


def test_v4l2_camera_is_read_at_its_rate(fake_camera, tmp_path: Path) -> None:
    """45 frames of the camera's size through face detection and landmarks, delivered at
    the camera's rate (15 fps, timestamps from the camera)."""
    cam: FakeCamera = fake_camera(fps=FPS)
    n = 45
    summary, src, frames, events = _run_camera(cam, n, tmp_path)
    steps = _steps([f["pts_time"] for f in frames], 1 / FPS)
    print(f"\nframes {src['frames']} dropped {src['dropped']} fps {src['fps']} wall {summary['wall_s']} s; "
          f"pts steps {sorted({round(s, 3) for s in steps})}")
    assert src["frames"] == n and len(frames) == n and src["error"] is None, src
    assert src["events"] == {"connecting": 1, "streaming": 1} and src["decode_errors"] == 0, src
    assert event_states(events) == ["connecting", "streaming"]
    assert {(f["width"], f["height"]) for f in frames} == {cam.size}
    assert [f["seq"] for f in frames] == list(range(n))
    # live: paced by the camera, not read as fast as possible (the same frames as a file: ~120 fps)
    assert 0.8 * FPS <= src["fps"] <= 1.2 * FPS, src
    assert summary["wall_s"] >= (n - 1) / FPS, summary
    # capture timestamps one frame period apart (a skipped capture would be a whole multiple)
    assert all(abs(s - round(s)) < 0.01 and round(s) >= 1 for s in steps), steps
    assert sum(round(s) == 1 for s in steps) >= 0.9 * len(steps), steps


def test_v4l2_camera_faces(face_camera, tmp_path: Path) -> None:
    """The shared faces clip from the camera: two faces found in (nearly) every frame."""
    cam: FakeCamera = face_camera(fps=FPS)
    n = 45
    _, src, frames, _ = _run_camera(cam, n, tmp_path)
    faces = [sum(o["label"] == "face" for o in f["objects"]) for f in frames]
    print(f"\nfaces {sum(faces)} in {len(frames)} frames")
    assert src["frames"] == n and len(frames) == n and src["error"] is None, src
    assert {(f["width"], f["height"]) for f in frames} == {cam.size}
    assert max(faces) <= FACES_PER_FRAME and sum(faces) >= 0.9 * FACES_PER_FRAME * n, faces


def test_v4l2_camera_unplugged_and_replugged(fake_camera, config: Path, tmp_path: Path) -> None:
    """Unplug the camera mid-run: DQBUF fails with ENODEV (stalled), the device path is
    gone (reconnecting, with backoff), and once a camera is plugged in again the run goes
    on with it: streaming again, frames with increasing timestamps, the down time reported."""
    cam: FakeCamera = fake_camera(fps=FPS)
    out = tmp_path / "out"
    jsonl = out / f"{cam.name}.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", cam.device, "--output", str(out),
                        "--json", "--no-progress", "--set", "decode.reconnect={initial_s: 0.2, max_s: 0.4, jitter: 0}",
                        env=cam.env())
    away_s = 1.0
    try:
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= 10, 20, "10 frames", proc)
        cam.unplug()
        unplugged = time.monotonic()
        wait_for(lambda: "reconnecting" in event_states(read_jsonl(jsonl)[1]), 5, "reconnecting", proc)
        time.sleep(max(0.0, unplugged + away_s - time.monotonic()))
        before = len(read_jsonl(jsonl)[0])
        cam.plug()
        plugged = time.monotonic()
        wait_for(lambda: event_states(read_jsonl(jsonl)[1]).count("streaming") >= 2, 5, "streaming again", proc)
        back = time.monotonic()
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= before + 10, 5, "10 frames after the replug", proc)
    finally:
        code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    src = source_stats(json.loads(stdout), cam.name)
    frames, events = read_jsonl(jsonl)
    states = event_states(events)
    print(f"\nevents: {states}\nreconnect_s: {src['reconnect_s']}; streaming {back - plugged:.2f} s after the "
          f"replug; frames {len(frames)} ({len(frames) - before} after the replug)")
    assert states[:4] == ["connecting", "streaming", "stalled", "connecting"], states
    assert states[-1] == "streaming" and states.count("streaming") == 2, states
    assert events[2]["reason"] == f"read error in {cam.device}: No such device", events[2]
    retries = [e for e in events if e["event"] == "reconnecting"]
    assert retries and all(e["reason"] == f"cannot open source {cam.device}: No such file or directory"
                           for e in retries), retries
    assert [e["delay_s"] for e in retries][:2] == [0.2, 0.4][:len(retries)], retries
    # down from the unplug until streaming again: the time away plus at most one backoff delay
    assert len(src["reconnect_s"]) == 1 and away_s - 0.1 <= src["reconnect_s"][0] < away_s + 1.5, src
    assert back - plugged < 1.5
    assert len(frames) >= before + 10 and src["error"] is None, src
    assert [f["seq"] for f in frames] == list(range(len(frames)))
    times = [f["pts_time"] for f in frames]
    assert all(b > a for a, b in itertools.pairwise(times)), times


def test_v4l2_camera_that_stops_sending_is_stalled(fake_camera, config: Path, tmp_path: Path) -> None:
    """A camera that stays plugged in but sends a frame only every 4 s: the read timeout
    (1 s) fires although V4L2 reads block in the kernel (the device is polled), the
    camera is reported stalled, closed (a V4L2 device streams to one opener at a time)
    and opened again, and SIGINT stops the run at once."""
    cam: FakeCamera = fake_camera(fps=0.25)
    out = tmp_path / "out"
    jsonl = out / f"{cam.name}.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", cam.device, "--output", str(out),
                        "--json", "--no-progress", "--set", "decode.read_timeout_s=1",
                        "--set", "decode.reconnect={initial_s: 0.2, max_s: 0.4, jitter: 0}", env=cam.env())
    try:
        wait_for(lambda: "streaming" in event_states(read_jsonl(jsonl)[1]), 10, "streaming", proc)
        streaming = time.monotonic()
        wait_for(lambda: "stalled" in event_states(read_jsonl(jsonl)[1]), 5, "stalled", proc)
        stalled = time.monotonic()
        wait_for(lambda: event_states(read_jsonl(jsonl)[1]).count("streaming") >= 2, 10, "streaming again", proc)
        again = time.monotonic()
    finally:
        t0 = time.monotonic()
        code, stdout, stderr = finish(proc)
        stop_s = time.monotonic() - t0
    _, events = read_jsonl(jsonl)
    stall = next(e for e in events if e["event"] == "stalled")
    print(f"\nevents {event_states(events)}; stalled {stalled - streaming:.2f} s after streaming, streaming "
          f"again {again - stalled:.2f} s later; stopped {stop_s:.2f} s after SIGINT")
    assert code == 0, stderr
    assert stall["reason"] == f"read error in {cam.device}: no frame for 1 s", stall
    assert 0.9 <= stalled - streaming < 2.5
    assert again - stalled < 9.0  # the old device closed about 3 s after the stall, then the next frame
    assert stop_s < 2.0, stop_s


@pytest.mark.parametrize("case", ["no camera", "another camera", "unplugged"])
def test_missing_camera_gives_up(request: pytest.FixtureRequest, config: Path, tmp_path: Path, case: str) -> None:
    """A /dev/videoN that cannot be opened (no camera at all; the fake camera at another
    path; the fake camera unplugged): bounded retries, then one line naming the device,
    no traceback, no hang."""
    device, env = "/dev/video43", None
    fake_camera = request.getfixturevalue("fake_camera") if case != "no camera" else None
    if case == "another camera":
        env = fake_camera("/dev/video42").env()
    elif case == "unplugged":
        cam: FakeCamera = fake_camera("/dev/video43")
        cam.unplug()
        env = cam.env()
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = vapipe("run", "events", "--config", str(config), "--source", device, "--output", str(out),
                  "--no-progress", "--set", "decode.reconnect={initial_s: 0.2, max_s: 0.4, jitter: 0, max_attempts: 3}",
                  timeout=30, env=env)
    took = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("vapipe: error:")]
    expected = (f"vapipe: error: gave up on {device} after 3 attempts: cannot open source {device}: "
                "No such file or directory")
    assert errors == [expected], proc.stderr
    _, events = read_jsonl(out / "video43.jsonl")
    assert event_states(events) == ["connecting", "reconnecting"] * 2 + ["connecting", "gave_up"], events
    assert [e["delay_s"] for e in events if e["event"] == "reconnecting"] == [0.2, 0.4], events
    assert took < 10
