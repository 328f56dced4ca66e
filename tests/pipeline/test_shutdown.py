"""Stopping ``vapipe run`` from outside (SIGTERM, SIGINT) and by a failing stage.

Contract checked here (from pipeline/runtime.py, pipeline/camera.py and stages/encode.py):

* A first SIGTERM/SIGINT stops reading; the frames already decoded or in
  flight in inference stages are finished and pass every stage; then the
  stages are closed (the encoder is flushed, the JSONL flushed) and the
  process exits 0 with ``stopped_by_signal`` in the summary.
* ``faces`` runs ``encode`` and then ``metadata`` on the same frame in one
  call chain, so after a clean stop the MP4 holds exactly as many frames as
  the JSONL has records, and both hold the frames ``0..N-1`` without gaps.
* A signal while a stream opens (``live: false`` opens it before the run starts, waiting
  up to the open timeout inside FFmpeg) ends the process at once, exit 0, no error.
* A stage failing with ``on_error: stop`` aborts the run with exit 1 and one
  line on stderr naming that stage; the frames that got through before it are
  in a playable MP4 and in the JSONL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.live.helpers import quiet_stream
from tests.media import CLIP

ROOT = Path(__file__).resolve().parents[2]
SPEC = CLIP.with_(frames=40)  # a synthetic clip (the content does not matter here)
START_DEADLINE_S = 90.0   # generous: model compilation on a loaded machine
STOP_DEADLINE_S = 15.0


@pytest.fixture
def cli_env(models_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["VAPIPE_MODELS_DIR"] = str(models_dir)
    return env


@pytest.fixture(scope="module")
def source(make_clip) -> Path:
    return make_clip(SPEC)


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _decode_all(path: Path) -> list:
    import av

    assert path.is_file(), f"{path} was not written"
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
    assert frames, f"{path} has no decodable frames"
    return frames


def _records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the last JSONL line is cut off"
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_a_looping_run_cleanly(cli_env, tmp_path: Path, source: Path, signum: int) -> None:
    out = tmp_path / "out"
    jsonl, mp4 = out / f"{source.stem}.jsonl", out / f"{source.stem}.mp4"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "run", "faces", "--source", str(source),
         "--set", "decode.loop=true", "--output", str(out), "--json"],
        cwd=ROOT, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # wait until the clip has looped at least once (it never ends by itself)
        deadline = time.monotonic() + START_DEADLINE_S
        while _count_lines(jsonl) <= 60:
            assert proc.poll() is None, f"run ended by itself (exit {proc.returncode}): {proc.stderr.read()}"
            assert time.monotonic() < deadline, "no output from the running pipeline"
            time.sleep(0.05)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=STOP_DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert "stopping" in stderr
    assert "error" not in stderr.lower(), stderr
    summary = json.loads(stdout)
    assert summary["stopped_by_signal"] is True
    assert summary["error"] is None
    written = summary["sources"][0]["frames"]
    assert written > 60

    records = _records(jsonl)  # every line is complete JSON
    frames = _decode_all(mp4)  # the file was finalised: every frame decodes
    assert [r["seq"] for r in records] == list(range(written))
    assert len(frames) == len(records)
    times = [f.pts * f.time_base for f in frames]
    assert all(b > a for a, b in zip(times, times[1:])), "timestamps must keep increasing across loops"
    pts = [r["pts_time"] for r in records]
    assert all(b > a for a, b in zip(pts, pts[1:])), "source time keeps increasing across loops"


OPENS_AS_FILE = """\
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {live: false, open_timeout_s: 20}}
      - {name: metadata, type: metadata}
"""


def test_a_signal_while_a_stream_opens_ends_the_run_at_once(tmp_path: Path) -> None:
    client_closed, done, requested = threading.Event(), threading.Event(), threading.Event()
    url = quiet_stream(b"", client_closed, done, requested)  # answers the request, then sends nothing
    config = tmp_path / "pipelines.yaml"
    config.write_text(OPENS_AS_FILE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "run", "p", "--config", str(config), "--source", url,
         "--output", str(tmp_path / "out"), "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert requested.wait(START_DEADLINE_S), proc.stderr.read() if proc.poll() is not None else "no request"
        time.sleep(0.5)  # inside the open (open timeout 20 s)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        stdout, stderr = proc.communicate(timeout=STOP_DEADLINE_S)
        ended = time.monotonic()
    finally:
        done.set()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert ended - signalled < 3.0, f"exited {ended - signalled:.1f} s after the signal"
    assert "Traceback" not in stderr and "error" not in stderr.lower(), stderr
    summary = json.loads(stdout)
    assert summary["stopped_by_signal"] is True and summary["error"] is None
    assert [s["frames"] for s in summary["sources"]] == [0]


FAILING = """\
pipelines:
  failing:
    description: faces, then a stage that fails on frame 20
    stages:
      - name: decode
        type: decode
      - name: face_detect
        type: detect
        params:
          model: mediapipe/face_detection_short_range
          decoder: blazeface
      - name: fail
        type: "pipeline.testing:Fail"
        on_error: stop
        params:
          every: 20
      - name: encode
        type: encode
      - name: metadata
        type: metadata
"""


def test_stage_failure_mid_run_keeps_a_playable_mp4(cli_env, tmp_path: Path, source: Path) -> None:
    cfg = tmp_path / "pipelines.yaml"
    cfg.write_text(FAILING, encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "failing", "--config", str(cfg),
         "--source", str(source), "--output", str(out), "--no-progress"],
        cwd=ROOT, env=cli_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    # the failing stage is named, not the inference stage whose results it was handed
    assert lines[0].startswith("vapipe: error: stage 'fail' "), lines[0]
    assert "planned failure on frame 19" in lines[0]

    records = _records(out / f"{source.stem}.jsonl")
    frames = _decode_all(out / f"{source.stem}.mp4")
    assert [r["seq"] for r in records] == list(range(19))  # frames 0..18 got through
    assert len(frames) == 19
    assert all((f.width, f.height) == (SPEC.width, SPEC.height) for f in frames)
