"""``vapipe serve`` as a real process stopped by a signal while an instance records: what
systemd, Docker and Kubernetes send (SIGTERM) must finish the outputs as Ctrl-C (SIGINT) does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import av
import pytest

from tests.cli import ROOT, cli_env
from tests.live.helpers import free_port

RECORDING = """
pipelines:
  rec:
    stages:
      - {name: decode, type: decode, params: {realtime: true, loop: true}}
      - {name: encode, type: encode}
      - {name: metadata, type: metadata, params: {format: json-lines}}
"""


def _request(url: str, body: dict | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                 method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_instances_and_leaves_playable_outputs(models_dir: Path, tmp_path: Path,
                                                                   sig: int, code: int) -> None:
    (tmp_path / "pipelines.yaml").write_text(RECORDING, encoding="utf-8")
    port = free_port()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--config", str(tmp_path / "pipelines.yaml"),
                             "--port", str(port), "--output", str(out), "--allow-dir", str(tmp_path)],
                            cwd=ROOT, env=cli_env(models_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                _request(f"{base}/healthz")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        iid = _request(f"{base}/pipelines/rec/1", {"source": {"uri": "testsrc://bars?width=320&height=240",
                                                                "type": "uri"}})
        while True:
            status = _request(f"{base}/pipelines/status/{iid}")
            if status["state"] == "RUNNING" and status["sources"] and status["sources"][0]["frames"] >= 25:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    videos = list(out.rglob("*.mp4"))
    records = [json.loads(line) for p in out.rglob("*.jsonl") for line in p.read_text().splitlines()]
    frames = [r for r in records if "seq" in r and "objects" in r]
    assert len(videos) == 1 and len(frames) >= 25
    with av.open(str(videos[0])) as container:  # finalised: every frame decodes to the last
        decoded = sum(1 for _ in container.decode(video=0))
    assert decoded == len(frames), (decoded, len(frames))
