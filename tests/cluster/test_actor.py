"""The camera group of a node, run in this process (no Ray): its ownership lease, the wait for an
earlier owner's lease, and a later placement continuing a camera's output."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from cluster.actor import CameraGroup
from cluster.resume import prepare_jsonl
from pipeline.config import parse_config

CONFIG = """\
pipelines:
  p:
    stages:
      - {name: decode, type: decode, params: {realtime: true}}
      - {name: metadata, type: metadata}
"""
SCENE = "testsrc://bars?width=64&height=48&frames=100000"


def _group(tmp_path: Path, uri: str = SCENE, **options) -> CameraGroup:
    spec = parse_config(CONFIG).get("p").model_dump()
    tasks = [{"camera": "cam", "uri": uri, **options.pop("task", {})}]
    return CameraGroup(spec, "<string>", tasks, {"run_id": "r1", "output_dir": str(tmp_path), **options})


def _seqs(path: Path) -> list[int]:
    return [r["seq"] for r in map(json.loads, path.read_text().splitlines()) if "event" not in r]


def test_a_group_the_driver_stops_reaching_stops_its_cameras(tmp_path: Path) -> None:
    group = _group(tmp_path, lease_s=1.0)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(group.run()))
    runner.start()
    deadline = time.monotonic() + 60
    while not (group.status()["cameras"].get("cam", {}).get("frames", 0) > 10):  # the driver polls ...
        assert time.monotonic() < deadline and runner.is_alive(), result
        time.sleep(0.3)
    last_poll = time.monotonic()  # ... and then is gone
    runner.join(timeout=30)
    assert not runner.is_alive() and result["state"] == "lease_expired"
    assert 1.0 <= time.monotonic() - last_poll < 10
    frames = _seqs(tmp_path / "cam.jsonl")
    assert frames == list(range(len(frames))) and 10 < len(frames) < 1000  # stopped cleanly, output closed


def test_cameras_start_after_the_old_owners_lease_and_continue_its_output(tmp_path: Path) -> None:
    path = tmp_path / "cam.jsonl"
    prepare_jsonl(path, "cam", "r1", 0, 0)
    with open(path, "a", encoding="utf-8") as fh:  # what the lost placement wrote, its last line cut short
        fh.writelines(json.dumps({"source": "cam", "seq": s, "objects": []}) + "\n" for s in range(30))
        fh.write('{"source":"cam","se')
    group = _group(tmp_path, lease_s=30.0, start_after_s=1.5, max_frames=40,
                   task={"part": 1, "start_seq": 20, "frames_before": 21})
    result = group.run()
    assert group.timings["started"] - group.timings["init"] >= 1.45  # waited for the old lease (1.5 s)
    assert result["starts"] == {"cam": 30} and result["exact"] == {"cam": True}
    assert _seqs(path) == list(range(40))  # 30 before, 10 more up to max_frames, each once
