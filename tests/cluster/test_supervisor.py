"""Cameras on a real Ray cluster of 3 worker nodes (1 CPU each) on this machine: even placement,
cameras waiting for room, cameras added and removed while a run goes, and a worker node killed
mid-run (6 file cameras, 2 RTSP cameras)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import parse_config

pytestmark = pytest.mark.slow

# decode (paced at the clip's rate, as a camera) -> face detector on every 5th frame -> MP4 -> JSON Lines
CONFIG = """\
pipelines:
  cams:
    stages:
      - {name: decode, type: decode, params: {realtime: true}}
      - name: faces
        type: detect
        params: {model: mediapipe/face_detection_short_range, decoder: blazeface, every: 5}
      - {name: encode, type: encode, params: {preset: ultrafast}}
      - {name: metadata, type: metadata}
"""
FRAMES = 250
#: frames a camera may hold between its decoder and its outputs when its node dies: decoded-frame and
#: packet queues, infer requests, the encoder's delay and the MP4 fragment not yet written (0.2 s)
IN_FLIGHT = 24


def _spec(realtime: bool = True) -> Any:
    spec = parse_config(CONFIG).get("cams")
    spec.stages[0].params["realtime"] = realtime
    return spec


def _jsonl(path: Path) -> tuple[list[int], list[dict]]:
    seqs, events = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        (events.append(rec) if "event" in rec else seqs.append(rec["seq"]))
    return seqs, events


def _video_frames(path: Path) -> int:
    """Frames decoded from a video file, every packet decoded without error (raises otherwise)."""
    import av

    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def _per_node(run: Any) -> dict[str, int]:
    nodes = {nid: 0 for nid, n in run.nodes.items() if n.cpus > 0}
    for c in run.cameras.values():
        if c.state in ("starting", "running") and c.node in nodes:
            nodes[c.node] += 1
    return nodes


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _supervised(run: Any, frames: int) -> tuple[threading.Thread, dict[str, Any]]:
    """``run`` supervised on a thread (its summary in ``result["summary"]`` once it ends), returned once
    every camera runs and has ``frames`` frames (the run is stopped if that does not happen)."""
    result: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: result.setdefault("summary", run.run()), daemon=True)
    runner.start()
    try:
        _wait(lambda: all(c.state == "running" and c.frames >= frames for c in run.cameras.values()), 120,
              "every camera to run")
    except BaseException:
        run.stop()
        runner.join(timeout=60)
        raise
    return runner, result


def test_cameras_without_room_wait_and_start_when_a_node_frees(ray_cluster: Any, clips: dict[str, Path],
                                                               tmp_path: Path) -> None:
    from cluster import ClusterOptions, ClusterRun

    # one camera per 1-CPU node: the 4th waits (pending) until one of the first three ends
    sources = [str(clips["short"])] * 4
    run = ClusterRun(_spec(realtime=False), sources, ClusterOptions(output_dir=tmp_path, cpus_per_camera=1.0),
                     names=[f"cam{i}" for i in range(4)])
    run.start()
    assert [c.state for c in run.cameras.values()].count("pending") == 1
    assert sorted(_per_node(run).values()) == [1, 1, 1]
    summary = run.run()
    assert [c.state for c in summary.cameras] == ["done"] * 4, summary.table()
    waited = next(c for c in summary.cameras if c.name == "cam3")
    assert waited.frames == 60
    for i in range(4):
        seqs, _ = _jsonl(tmp_path / f"cam{i}.jsonl")
        assert seqs == list(range(60))


def test_a_run_whose_cameras_were_all_removed_waits_for_more_or_stop() -> None:
    from cluster import ClusterRun

    run = ClusterRun(_spec(), ["a.mp4", "b.mp4"])  # not started: nothing placed, no cluster needed
    assert run.camera_name("a.mp4") == "a-2" and run.add_camera("a.mp4") == "a-2"
    for name in ("a", "b", "a-2"):
        run.remove_camera(name)
    assert {c.state for c in run.cameras.values()} == {"stopped"} and not run.finished
    run.stop()
    assert run.finished
    with pytest.raises(RuntimeError, match="stopping"):
        run.add_camera("c.mp4")


def test_cameras_added_and_removed_while_the_run_goes(ray_cluster: Any, tmp_path: Path) -> None:
    from cluster import ClusterOptions, ClusterRun

    from .helpers import LIGHT_CONFIG, check_outputs, make_clip

    clip = make_clip(tmp_path / "cam.mp4", 1000)  # 40 s at 25 fps: longer than the test
    out = tmp_path / "out"
    # 0.5 CPUs per camera on three 1-CPU nodes: 2, 1 and 1 cameras, the pair in one actor
    run = ClusterRun(parse_config(LIGHT_CONFIG).get("cams"), [str(clip)] * 4,
                     ClusterOptions(output_dir=out, cpus_per_camera=0.5), names=["a", "b", "c", "d"])
    runner, result = _supervised(run, 10)
    try:
        with run._lock:
            pair = next(g for g in run.groups.values() if len(g.cameras) == 2)
            removed, sibling = pair.cameras
        run.remove_camera(removed)  # the actor stops it alone: its outputs are closed on return
        cam = run.cameras[removed]
        assert cam.state == "stopped" and removed in run.removed
        check_outputs(out, removed, cam.frames)
        frames = run.cameras[sibling].frames
        _wait(lambda: run.cameras[sibling].frames > frames + 25, 30, f"{sibling} to go on in the same actor")
        assert run.cameras[sibling].group == pair.key and not pair.gone
        with pytest.raises(KeyError):
            run.remove_camera(removed)

        added = run.add_camera(str(clip))  # an actor of its own, on a node with the fewest cameras ...
        assert added == "cam" and run.cameras[added].state == "starting"
        assert run.cameras[added].node != pair.node  # ... and CPUs free: the pair's actor still holds 1 CPU
        _wait(lambda: run.cameras[added].frames >= 10, 120, "the added camera to run")
        assert max(_per_node(run).values()) - min(_per_node(run).values()) <= 1, _per_node(run)
    finally:
        run.stop()
        runner.join(timeout=90)
    assert not runner.is_alive()
    summary = result["summary"]
    assert {c.name: c.state for c in summary.cameras} == {n: "stopped" for n in ("a", "b", "c", "d", "cam")}
    for c in summary.cameras:
        check_outputs(out, c.name, c.frames)
    with pytest.raises(RuntimeError, match="stopping"):
        run.add_camera(str(clip))


def test_node_killed_mid_run(ray_cluster: Any, clips: dict[str, Path], rtsp_servers: list[Any],
                             tmp_path: Path) -> None:
    from cluster import ClusterOptions, ClusterRun

    files = [f"file{i}" for i in range(6)]
    lives = ["rtsp0", "rtsp1"]
    sources = [str(clips["long"])] * 6 + [s.url for s in rtsp_servers]
    run = ClusterRun(_spec(), sources, ClusterOptions(output_dir=tmp_path, cpus_per_camera=0.25, max_frames=FRAMES),
                     names=files + lives)
    runner, result = _supervised(run, 25)
    try:
        with run._lock:
            before = _per_node(run)
            owners = {c.name: c.node for c in run.cameras.values()}
        assert max(before.values()) - min(before.values()) <= 1, before  # 8 cameras on 3 nodes: 3, 3, 2
        victim_id = max(before, key=lambda nid: (any(owners[n] == nid for n in lives), before[nid]))
        victim = next(n for n in ray_cluster.worker_nodes if n.node_id == victim_id)
        orphans = sorted(n for n, nid in owners.items() if nid == victim_id)
        survivors = sorted(set(owners) - set(orphans))
        killed_at = time.monotonic()
        ray_cluster.remove_node(victim, allow_graceful=False)
        runner.join(timeout=180)
        assert not runner.is_alive(), "the run did not end"
    finally:
        run.stop()
        runner.join(timeout=60)
    summary = result["summary"]
    table = summary.table()
    print(table)

    # the loss is detected from Ray's node failure signal within seconds
    lost = [n for n in run.nodes_lost if n["node"] == victim_id]
    assert len(lost) == 1, table
    detection_s = lost[0]["detected_at"] - killed_at
    assert detection_s < 10, detection_s

    # every orphan produced frames again on another node; the others never moved
    cams = {c.name: c for c in summary.cameras}
    resumed = {}
    for name in orphans:
        cam = cams[name]
        assert len(cam.losses) == 1 and cam.losses[0].resumed_at is not None, table
        assert cam.losses[0].placed_at >= cam.losses[0].detected_at
        assert cam.node != victim_id and len(cam.placements) == 2
        resumed[name] = cam.losses[0].resumed_at - killed_at
    print(f"node loss detected after {detection_s:.2f} s; orphans {orphans} produced frames again after "
          + ", ".join(f"{k} {v:.1f} s" for k, v in resumed.items()))
    assert max(resumed.values()) < 90
    for name in survivors:
        assert not cams[name].losses and len(cams[name].placements) == 1
    assert all(c.state == "done" for c in summary.cameras), table

    # after the move the cameras are spread evenly over the two nodes left (4 and 4)
    per_node: dict[str, int] = {}
    for c in summary.cameras:
        per_node[c.node] = per_node.get(c.node, 0) + 1
    assert victim_id not in per_node and max(per_node.values()) - min(per_node.values()) <= 1, per_node

    # cameras on the surviving nodes never stalled: frames grew in every 3 s window around the loss
    for name in survivors:
        samples = [(t, f[name]) for t, f in run.history if killed_at - 1 <= t <= killed_at + 8
                   and f[name] < FRAMES]
        for (t0, n0) in samples:
            later = [n for t, n in samples if t0 + 3 <= t <= t0 + 4]
            assert not later or max(later) > n0, (name, t0 - killed_at, samples)

    # no camera owned twice: every JSON Lines file has strictly increasing seqs, one placement after the other
    for name in files + lives:
        seqs, events = _jsonl(tmp_path / f"{name}.jsonl")
        assert all(b > a for a, b in zip(seqs, seqs[1:])), name
        placed = [e for e in events if e["event"] == "placed"]
        assert [e["part"] for e in placed] == list(range(len(cams[name].placements))), (name, placed)
        assert len(seqs) == FRAMES, (name, len(seqs))

    # file cameras: every frame written exactly once (continued after the last written frame) ...
    for name in files:
        seqs, events = _jsonl(tmp_path / f"{name}.jsonl")
        assert seqs == list(range(FRAMES)), name
        segments = [tmp_path / f"{name}.mp4", *sorted(tmp_path.glob(f"{name}.from*.mp4"))]
        frames = [_video_frames(p) for p in segments]  # playable: every segment decodes without error
        if name in orphans:
            assert len(segments) == 2, segments
            start = cams[name].losses[0].resume_seq
            assert cams[name].losses[0].exact and frames[1] == FRAMES - start, (name, frames, start)
            # ... and the video lost at most what was in flight in the killed process
            assert FRAMES - IN_FLIGHT <= sum(frames) <= FRAMES, (name, frames)
            print(f"{name}: killed segment {frames[0]} of {start} frames written to JSON Lines, "
                  f"{start - frames[0]} lost in flight")
            assert cams[name].losses[0].video_lost == start - frames[0]  # counted by the run itself
        else:
            assert frames == [FRAMES], (name, frames)

    # live cameras continue from the live stream, numbering on from the last frame written
    for name in lives:
        seqs, _ = _jsonl(tmp_path / f"{name}.jsonl")
        if name in orphans:
            start = cams[name].losses[0].resume_seq
            # a live camera may drop frames, the first after the move among them (the freshest wins)
            first = next(i for i, s in enumerate(seqs) if s >= start)
            assert seqs[first - 1] == start - 1, (name, start, seqs[first - 1])
            frames = _video_frames(tmp_path / f"{name}.mp4")  # the killed segment plays
            lost = first - frames
            assert 0 <= lost <= IN_FLIGHT and cams[name].losses[0].video_lost == lost, (name, lost)
