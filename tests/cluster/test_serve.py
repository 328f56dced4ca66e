"""``vapipe serve --cluster``: the REST service with its instances' cameras on the test cluster (a head
without CPUs and 3 worker nodes of 1 CPU), /metrics gathered from the actors, and the errors a user
sees when the cluster cannot be used."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live.helpers import free_port, vapipe

from .helpers import LIGHT_CONFIG, check_outputs, make_clip
from .test_supervisor import IN_FLIGHT


def _samples(text: str, name: str, instance: str | None = None) -> dict[tuple, float]:
    """Samples of ``name`` (of ``instance`` only, if given) by their labels other than instance and pipeline."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and instance in (None, s.labels.get("instance")):
                out[tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("instance", "pipeline")))] = s.value
    return out


def _by_source(text: str, name: str) -> dict[str, float]:
    return {dict(k)["source"]: v for k, v in _samples(text, name).items()}


def _wait(client: Any, iid: str, predicate: Any, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = client.get(f"/pipelines/status/{iid}").json()
        if predicate(status):
            return status
        if time.monotonic() > deadline or status["state"] in ("ERROR", "COMPLETED", "ABORTED") and \
                not predicate(status):
            raise AssertionError(f"waiting for {what}: {status}")
        time.sleep(0.2)


@pytest.fixture
def cluster_client(ray_cluster: Any, tmp_path: Path) -> Iterator[tuple[Any, Any, Path]]:
    """(TestClient, manager, folder): vapipe serve --cluster on the test cluster, files under ``folder``."""
    from fastapi.testclient import TestClient

    from service.cli import build_parser, serve_app

    config = tmp_path / "pipelines.yaml"
    config.write_text(LIGHT_CONFIG, encoding="utf-8")
    args = build_parser().parse_args(["--config", str(config), "--allow-dir", str(tmp_path), "--output",
                                      str(tmp_path / "out"), "--cluster", ray_cluster.address,
                                      "--cpus-per-camera", "0.5"])
    app, manager = serve_app(args)
    client = TestClient(app)
    try:
        yield client, manager, tmp_path
    finally:
        manager.close()  # stops what still runs; the driver stays connected (the fixture's)
        client.close()


@pytest.mark.slow
def test_instances_run_on_the_cluster_with_metrics_and_sources_at_run_time(cluster_client: Any) -> None:
    import ray

    client, manager, folder = cluster_client
    clip = make_clip(folder / "street.mp4", 1500)   # 60 s at 25 fps: longer than the test
    short = make_clip(folder / "short.mp4", 40)
    iid = client.post("/pipelines/cams/1", json={"source": {"uri": f"file://{clip}", "type": "uri"}}).json()
    _wait(client, iid, lambda s: s["state"] == "RUNNING" and s["avg_fps"] > 0, 120, "the first camera's frames")

    # two more cameras while it runs: each on a node of its own (1 CPU each, 0.5 per camera: even spread)
    added = [client.post(f"/pipelines/{iid}/sources", json={"uri": f"file://{clip}"}) for _ in range(2)]
    assert [r.status_code for r in added] == [200, 200] and [r.json()["id"] for r in added] == ["street-2",
                                                                                                 "street-3"]
    _wait(client, iid, lambda s: len(s["sources"]) == 3 and all(x["frames"] >= 25 and x["state"] == "streaming"
                                                                for x in s["sources"]), 120, "three cameras")
    nodes = {s["id"]: s["node"] for s in manager.get(iid).sources()}
    assert len(set(nodes.values())) == 3, nodes

    # /metrics: every camera's frame counter grows, at the rate the status reports; the cluster gauges
    t1, first = time.monotonic(), client.get("/metrics").text
    time.sleep(5.0)
    t2, second = time.monotonic(), client.get("/metrics").text
    avg_fps = client.get(f"/pipelines/status/{iid}").json()["avg_fps"]
    frames1, frames2 = _by_source(first, "vapipe_frames_total"), _by_source(second, "vapipe_frames_total")
    assert set(frames2) == {"street", "street-2", "street-3"}
    assert all(frames2[s] > frames1[s] > 0 for s in frames2), (frames1, frames2)
    rate = (sum(frames2.values()) - sum(frames1.values())) / (t2 - t1)
    assert abs(rate - avg_fps) <= 0.2 * avg_fps, (rate, avg_fps)  # counts gathered every 0.5 s
    assert all(v > 0 for v in _by_source(second, "vapipe_source_fps").values())
    on = [dict(k) for k, v in _samples(second, "vapipe_source_state").items() if v == 1]
    assert sorted((x["source"], x["state"]) for x in on) == [(s, "streaming") for s in sorted(frames2)]
    cameras = {dict(k)["state"]: v for k, v in _samples(second, "vapipe_cluster_cameras").items()}
    assert cameras["running"] == 3 and cameras["pending"] == 0 and cameras["lost"] == 0, cameras
    assert _samples(second, "vapipe_cluster_actors") == {(): 3.0}
    assert _by_source(second, "vapipe_cluster_camera_losses_total") == {s: 0.0 for s in frames2}
    alive = [n for n in ray.nodes() if n["Alive"]]
    assert _samples(second, "vapipe_cluster_nodes_alive") == {(): float(len(alive))}
    assert _samples(second, "vapipe_cluster_cpus") == {(): 3.0}
    assert _samples(second, "vapipe_cluster_nodes_lost_total") == {(): 0.0}
    latency = _by_source(second, "vapipe_frame_latency_seconds_count")
    assert all(latency[s] >= frames1[s] for s in frames2), latency  # histograms gathered from the actors
    assert _samples(second, "vapipe_stage_latency_seconds_count")
    if shutil.which("promtool"):  # tests/service/test_metrics.py installs it (Debian prometheus) or says why not
        check = subprocess.run(["promtool", "check", "metrics"], input=second, capture_output=True, text=True,
                               timeout=60)
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout + check.stderr

    # a camera's actor process dies: the camera is placed again and continues; /metrics counts the failover
    run = manager.get(iid).handle.run
    with run._lock:
        victim = run.groups[run.cameras["street-2"].group].actor
        before = run.cameras["street-2"].frames
    ray.kill(victim, no_restart=True)
    _wait(client, iid, lambda s: next(x for x in s["sources"] if x["id"] == "street-2")["frames"] > before + 25,
          120, "street-2 to continue on a new actor")
    after = client.get("/metrics").text
    assert _by_source(after, "vapipe_cluster_camera_losses_total") == {"street": 0.0, "street-2": 1.0,
                                                                       "street-3": 0.0}
    assert _by_source(after, "vapipe_frames_total")["street-2"] > before + 25
    assert {dict(k)["state"]: v for k, v in _samples(after, "vapipe_cluster_cameras").items()}["running"] == 3

    # no live pictures from other nodes: a one-line 501
    live = client.get(f"/live/{iid}/street")
    assert live.status_code == 501 and "not available for instances on a Ray cluster" in live.json()["detail"]

    # one camera removed: its outputs are closed when the call returns; the others go on
    gone = client.delete(f"/pipelines/{iid}/sources/street-3")
    assert gone.status_code == 200 and [s["id"] for s in gone.json()["sources"]] == ["street", "street-2"]
    removed = next(c for c in manager.get(iid).handle.run.cameras.values() if c.name == "street-3")
    assert removed.state == "stopped"
    check_outputs(folder / "out" / iid, "street-3", removed.frames)
    assert client.delete(f"/pipelines/{iid}/sources/street-3").status_code == 404

    # stopping the instance: ABORTED (DL Streamer Pipeline Server's state for a stopped instance),
    # every output closed and playable, the status counts what the files hold
    stopped = client.delete(f"/pipelines/{iid}").json()
    assert stopped["state"] == "ABORTED", stopped
    frames = {s["id"]: s["frames"] for s in stopped["sources"]}
    assert set(frames) == {"street", "street-2"} and all(25 <= n < 1500 for n in frames.values()), frames
    check_outputs(folder / "out" / iid, "street", frames["street"])
    check_outputs(folder / "out" / iid, "street-2", frames["street-2"], placements=2, in_flight=IN_FLIGHT)
    assert client.post(f"/pipelines/{iid}/sources", json={"uri": f"file://{clip}"}).status_code == 409

    # an instance whose file ends by itself: COMPLETED, every frame written
    done = client.post("/pipelines/cams/1", json={"source": {"uri": f"file://{short}", "type": "uri"}}).json()
    status = _wait(client, done, lambda s: s["state"] == "COMPLETED", 120, "the short clip to end")
    assert [s["frames"] for s in status["sources"]] == [40]
    check_outputs(folder / "out" / done, "short", 40)
    metrics = client.get("/metrics").text
    for instance, state in ((iid, "ABORTED"), (done, "COMPLETED")):
        assert _samples(metrics, "vapipe_cluster_actors", instance) == {(): 0.0}
        assert _samples(metrics, "vapipe_instance_state", instance)[(("state", state),)] == 1.0
    assert _samples(metrics, "vapipe_frames_total", done) == {(("source", "short"),): 40.0}


def test_what_a_cluster_cannot_run_is_refused(cluster_client: Any) -> None:
    client, _, folder = cluster_client
    clip = make_clip(folder / "door.mp4", 250)  # 10 s: still running when the source is added
    body = {"source": {"uri": f"file://{clip}", "type": "uri"},
            "destination": {"metadata": {"type": "file", "path": str(folder / "results.json"), "format": "json"}}}
    refused = client.post("/pipelines/cams/1", json=body)
    assert refused.status_code == 400 and refused.json()["detail"].startswith(
        "stage metadata: format 'json' (one JSON array; destination.metadata.format of a request) cannot be "
        "written on a Ray cluster"), refused.json()
    assert client.get("/pipelines/status").json() == []

    # a file destination without {source}: one camera may write it, a second one may not
    shared = folder / "results.jsonl"
    body["destination"]["metadata"].update(path=str(shared), format="json-lines")
    first = client.post("/pipelines/cams/1", json=body).json()
    _wait(client, first, lambda s: s["state"] == "RUNNING", 30, "the first instance to run")
    more = client.post(f"/pipelines/{first}/sources", json={"uri": f"file://{clip}"})
    assert more.status_code == 400 and more.json()["detail"] == (
        f"camera door-2 would write {shared}, which camera door writes: on a Ray cluster every camera needs files "
        "of its own (put {source} in the path)")
    second = client.post("/pipelines/cams/1", json=body).json()
    status = _wait(client, second, lambda s: s["state"] == "ERROR", 30, "the second instance to be refused")
    assert status["message"] == f"camera door would write {shared}, which camera door of instance {first} writes: " \
        "on a Ray cluster every camera needs files of its own (put {source} in the path)"
    assert client.delete(f"/pipelines/{first}").json()["state"] in ("ABORTED", "COMPLETED")


def test_serve_cluster_errors_are_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    unreachable = vapipe("serve", "--cluster", f"127.0.0.1:{port}", "--port", str(free_port()), timeout=60)
    assert unreachable.returncode == 2, unreachable.stderr
    assert unreachable.stderr.strip() == (f"vapipe: error: cannot connect to the Ray cluster at 127.0.0.1:{port}: "
                                          f"nothing answers at 127.0.0.1:{port} (Connection refused)")
    cores = vapipe("serve", "--cluster", "auto", "--cores", "2", timeout=60)
    assert cores.returncode == 2 and cores.stderr.strip() == (
        "vapipe: error: --cores is not supported with --cluster (each actor's budget is its Ray CPUs: "
        "--cpus-per-camera)")
    alone = vapipe("serve", "--cpus-per-camera", "0.5", timeout=60)
    assert alone.returncode == 2 and alone.stderr.strip() == "vapipe: error: --cpus-per-camera needs --cluster"
    fake = tmp_path / "no-ray" / "ray"  # an environment without Ray
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n", encoding="utf-8")
    missing = vapipe("serve", "--cluster", "auto", timeout=60, env={"PYTHONPATH": str(fake.parent)})
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "vapipe: error: --cluster needs Ray: pip install 'vapipe[cluster]' (or pip install ray)")
