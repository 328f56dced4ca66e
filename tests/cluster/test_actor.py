"""The camera group of a node, run in this process (no Ray): its ownership lease, the wait for an
earlier owner's lease, a later placement continuing a camera's output, and a camera taken out of
its group while the others go on."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

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


def _two_cameras_running(config: str, tmp_path: Path) -> tuple[CameraGroup, threading.Thread, dict, float]:
    """A group of cameras "one" and "two" on the scene, run on a thread until both have made 10
    frames; the group, its thread, the dict its result goes into, and the monotonic deadline."""
    spec = parse_config(config).get("p").model_dump()
    tasks = [{"camera": "one", "uri": SCENE}, {"camera": "two", "uri": SCENE}]
    group = CameraGroup(spec, "<string>", tasks, {"run_id": "r1", "output_dir": str(tmp_path), "lease_s": 60.0})
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(group.run()))
    runner.start()
    deadline = time.monotonic() + 60
    while not all(group.status()["cameras"].get(c, {}).get("frames", 0) > 10 for c in ("one", "two")):
        assert time.monotonic() < deadline and runner.is_alive(), result
        time.sleep(0.2)
    return group, runner, result, deadline


def test_a_camera_removed_from_a_running_group_stops_alone(tmp_path: Path) -> None:
    group, runner, result, deadline = _two_cameras_running(CONFIG, tmp_path)
    try:
        status = group.status()  # what the driver gathers for the service's metrics
        one = status["cameras"]["one"]
        assert one["state"] == "streaming" and one["latency"]["count"] > 10
        assert set(status["stages"]) == {"metadata"} and status["stages"]["metadata"]["count"] > 20
        gone = group.remove("one")
        assert _seqs(tmp_path / "one.jsonl") == list(range(gone["frames"]))  # closed when remove returns
        assert gone["last_seq"] == gone["frames"] - 1
        with pytest.raises(KeyError):
            group.remove("one")
        frames = group.status()["cameras"]["two"]["frames"]
        while group.status()["cameras"]["two"]["frames"] < frames + 10:  # the other camera goes on
            assert time.monotonic() < deadline + 30 and runner.is_alive(), result
            time.sleep(0.2)
        assert "one" not in group.status()["cameras"]
    finally:
        group.stop()
        runner.join(timeout=30)
    assert result["state"] == "ended" and result["status"]["cameras"]["two"]["frames"] > frames
    assert len(_seqs(tmp_path / "two.jsonl")) == result["status"]["cameras"]["two"]["frames"]


def test_a_camera_removed_before_its_group_starts_never_starts(tmp_path: Path) -> None:
    spec = parse_config(CONFIG).get("p").model_dump()
    tasks = [{"camera": "one", "uri": SCENE}, {"camera": "two", "uri": SCENE}]
    group = CameraGroup(spec, "<string>", tasks, {"run_id": "r1", "output_dir": str(tmp_path), "max_frames": 5})
    assert group.remove("one") == {"frames": 0, "last_seq": None, "dropped": 0}
    result = group.run()
    assert [s["source"] for s in result["summary"]["sources"]] == ["two"]
    assert not (tmp_path / "one.jsonl").exists() and _seqs(tmp_path / "two.jsonl") == list(range(5))


def test_a_removed_cameras_messages_stay_in_the_groups_totals(tmp_path: Path) -> None:
    """The driver sums the groups' MQTT counters into the service's metrics: a camera taken out of
    its group keeps its messages counted there (a counter never goes down)."""
    from tests.live.helpers import free_port

    config = CONFIG.replace("      - {name: metadata, type: metadata}\n",
                            f"      - {{name: mqtt, type: mqtt, params: {{host: '127.0.0.1:{free_port()}', "
                            "buffer: 5}}\n")  # nothing listens there: every message is dropped
    group, runner, result, _ = _two_cameras_running(config, tmp_path)
    try:
        gone = group.remove("one")
        after = sum(p["dropped"] for p in group.status()["publishers"])
        assert after >= gone["frames"] > 10
    finally:
        group.stop()
        runner.join(timeout=30)
    assert result["state"] == "ended"
    assert sum(p["dropped"] for p in result["status"]["publishers"]) >= after
