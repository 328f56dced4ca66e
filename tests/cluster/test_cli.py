"""``vapipe run --cluster``: a CLI process as the driver of the test cluster, stopped with SIGINT."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import av
import pytest

from tests.live.helpers import vapipe_popen, wait_for

from .test_supervisor import CONFIG

pytestmark = pytest.mark.slow


def test_cli_runs_on_the_cluster_and_stops_cleanly(ray_cluster: Any, clips: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "cams.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    out = tmp_path / "out"
    # the token alone: vapipe turns token mode on for an explicit address (Ray does only for auto)
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    proc = vapipe_popen("run", "cams", "--config", str(config), "--source", str(clips["long"]), "--source",
                        str(clips["long"]), "--cluster", ray_cluster.address, "--cpus-per-camera", "0.5", "--json",
                        "--output", str(out), env=env)
    try:
        jsonl = [out / "long.jsonl", out / "long-2.jsonl"]
        wait_for(lambda: all(p.is_file() and p.read_text().count("\n") > 20 for p in jsonl), 120,
                 "both cameras to write frames", proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    cams = {c["name"]: c for c in summary["cameras"]}
    assert set(cams) == {"long", "long-2"}
    assert len({c["node"] for c in cams.values()}) == 2  # one camera per node: the spread is even
    for name, cam in cams.items():
        assert cam["state"] == "stopped" and 20 <= cam["frames"] < 250
        lines = [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
        seqs = [r["seq"] for r in lines if "event" not in r]
        assert seqs == list(range(len(seqs))) and len(seqs) == cam["frames"]
        with av.open(str(out / f"{name}.mp4")) as video:  # closed properly: every frame written plays
            assert sum(1 for _ in video.decode(video=0)) == cam["frames"]
