"""The process-wide thread plan: invariants, user choices, process-wide settings."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from pipeline.config import load_config
from pipeline.graph import build_graph
from pipeline.threads import (InferInfo, ThreadPlan, apply_global, available_cores, plan_for_graph, plan_overrides,
                              plan_threads)

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ("CPU", "GPU", "AUTO:CPU", "CPU")


def _graph(name: str):
    cfg = load_config(str(ROOT / "pipelines.yaml"), check_files=False)
    return build_graph(cfg.get(name), str(ROOT / "pipelines.yaml"))


def test_one_core_gives_every_pool_one_thread() -> None:
    plan = plan_for_graph(_graph("persons"), sources=1, cores=1, measure=False)
    assert plan.decoder_threads == 1 and plan.cv2_threads == 1
    assert plan.infer == {"person_detect": {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1}}
    assert not plan.oversubscribed and plan.demand <= 1.001


def test_other_devices_are_left_to_their_plugins() -> None:
    plan = plan_threads(8, 1, [InferInfo("a", "GPU"), InferInfo("b", "AUTO:CPU"), InferInfo("c", "CPU", ms=40.0)])
    assert list(plan.infer) == ["c"] and plan.infer["c"]["INFERENCE_NUM_THREADS"] >= 4
    assert plan.untouched == {"a": "GPU", "b": "AUTO:CPU"}


def test_latency_hint_gets_one_stream() -> None:
    plan = plan_threads(5, 1, [InferInfo("a", "CPU", "LATENCY", ms=40.0)])
    assert plan.infer["a"]["NUM_STREAMS"] == 1 and plan.infer["a"]["INFERENCE_NUM_THREADS"] >= 3


def test_default_cores_are_the_affinity() -> None:
    assert plan_threads(None, 1, []).cores == available_cores() >= 1


def test_overrides_fill_only_what_the_user_left_open() -> None:
    graph = _graph("faces")
    plan = plan_for_graph(graph, sources=1, cores=4)
    out = plan_overrides(plan, graph, {})
    assert out["decode"]["threads"] == plan.decoder_threads >= 1
    # unpinned: pinned, OpenVINO starts every model's streams on the same cores; the precision
    # where this CPU's f32 is no slower than its default (tests/pipeline/test_precision.py)
    measured = {n: {"INFERENCE_PRECISION_HINT": p} for n, p in plan.precision.items()}
    assert out["face_detect"]["config"] == {**plan.infer["face_detect"], "ENABLE_CPU_PINNING": False,
                                            **measured.get("face_detect", {})}
    assert set(out["landmarks"]["config"]) == {"NUM_STREAMS", "INFERENCE_NUM_THREADS", "ENABLE_CPU_PINNING",
                                               *measured.get("landmarks", {})}

    user = {"decode": {"threads": 3}, "landmarks": {"config": {"NUM_STREAMS": 2, "PERF_COUNT": True}},
            "face_detect": {"config": {"INFERENCE_PRECISION_HINT": "f32", "ENABLE_CPU_PINNING": True}}}
    plan = plan_for_graph(graph, sources=1, cores=4, overrides=user)
    out = plan_overrides(plan, graph, user)
    assert out["decode"]["threads"] == 3
    # this plan's own precision: the user's streams make it time the models again
    measured = {n: {"INFERENCE_PRECISION_HINT": p} for n, p in plan.precision.items()}
    assert out["landmarks"]["config"] == {"NUM_STREAMS": 2, "PERF_COUNT": True, **measured.get("landmarks", {})}
    assert out["face_detect"]["config"]["INFERENCE_PRECISION_HINT"] == "f32"
    assert out["face_detect"]["config"]["ENABLE_CPU_PINNING"] is True  # the user's value wins
    assert out["face_detect"]["config"]["NUM_STREAMS"] >= 1
    assert "decode" in plan.user_set and "landmarks" in plan.user_set
    assert "-> 3 thread (set) each" in plan.summary()
    assert user["decode"] == {"threads": 3}  # the caller's dict is not changed


def test_cores_zero_keeps_every_runtime_default() -> None:
    graph = _graph("persons")
    plan = plan_for_graph(graph, sources=1, cores=0)
    assert not plan.enabled and plan.infer == {}
    assert plan_overrides(plan, graph, {"x": {"y": 1}}) == {"x": {"y": 1}}
    assert "runtime defaults" in plan.summary()
    apply_global(plan)()  # no-op


def test_apply_global_sets_and_restores_opencv_threads() -> None:
    import cv2

    before = cv2.getNumThreads()
    plan = ThreadPlan(cores=2, sources=1, decoder_threads=1, cv2_threads=1)
    restore = apply_global(plan)
    try:
        assert cv2.getNumThreads() == 1
    finally:
        restore()
    assert cv2.getNumThreads() == before


def test_apply_global_budgets_torch_only_when_already_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, list[int]] = {"threads": [], "interop": []}
    fake = types.SimpleNamespace(get_num_threads=lambda: 8, set_num_threads=calls["threads"].append,
                                 set_num_interop_threads=calls["interop"].append)
    monkeypatch.setitem(sys.modules, "torch", fake)
    plan = plan_threads(4, 1, [InferInfo("a", ms=3.0)], decode_ms=2.0, host_ms=0.5)
    assert plan.runtime_threads == 3
    restore = apply_global(plan)
    assert calls["threads"] == [3] and calls["interop"] == [1]
    restore()
    assert calls["threads"] == [3, 8]


def test_ort_session_options_share_the_planned_global_pool() -> None:
    """A user stage's ONNX Runtime session joins the process-wide pool sized by the plan (in a
    fresh process: ORT's global pool can be created once)."""
    pytest.importorskip("onnxruntime")
    code = """if True:
        import onnxruntime as ort
        from pipeline.planner import InferInfo, plan_threads
        from pipeline.ort_engine import global_pool
        from pipeline.threads import ort_session_options
        plan = plan_threads(4, 1, [InferInfo("a", hint="LATENCY", ms=40.0, engine="onnxruntime")],
                            decode_ms=2.0, host_ms=0.5)
        opts = ort_session_options(plan)
        print(plan.infer["a"]["INFERENCE_NUM_THREADS"], global_pool(99)["intra_op"], opts.use_per_session_threads,
              opts.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL)
    """
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    threads, pool, per_session, sequential = out.stdout.split()
    assert int(threads) >= 3 and int(pool) == int(threads)  # one LATENCY stream: all its threads per inference
    assert per_session == "False" and sequential == "True"


def test_run_summary_shows_the_plan(clip: Path, tmp_path: Path) -> None:
    from pipeline.runtime import RunOptions, run_pipeline

    summary = run_pipeline(_graph("persons"), [str(clip)],
                           RunOptions(output_dir=tmp_path, max_frames=3, cores=2, handle_signals=False))
    assert summary.error is None
    assert summary.threads is not None and summary.threads.startswith("threads: 2 cores")
    assert summary.as_dict()["threads"] == summary.threads
    assert summary.threads in summary.table()


def test_cameras_sharing_a_model_find_what_one_camera_finds(videos_dir: Path, tmp_path: Path) -> None:
    """Two cameras on the same clip (one compiled model, lowered decoders): each finds
    the boxes a single camera finds."""
    import json

    from pipeline.runtime import RunOptions, run_pipeline

    def read_records(folder: Path) -> dict[str, list[dict]]:
        return {p.name: [r for r in map(json.loads, p.read_text().splitlines()) if "seq" in r]
                for p in sorted(folder.glob("*.jsonl"))}

    clip = str(videos_dir / "one-by-one-person-detection.mp4")
    runs = {}
    for name, sources in (("one", [clip]), ("two", [clip, clip])):
        summary = run_pipeline(_graph("persons"), sources, RunOptions(output_dir=tmp_path / name, max_frames=120,
                                                                      cores=2, handle_signals=False))
        assert summary.error is None
        runs[name] = summary
    one = read_records(tmp_path / "one")
    two = read_records(tmp_path / "two")
    assert len(one) == 1 and len(two) == 2
    ref = next(iter(one.values()))
    for records in two.values():
        assert [r["seq"] for r in records] == [r["seq"] for r in ref]
        for a, b in zip(ref, records):
            assert len(a["objects"]) == len(b["objects"])
            for oa, ob in zip(a["objects"], b["objects"]):
                assert max(abs(x - y) for x, y in zip(oa["box"], ob["box"])) < 1.0


def test_a_reclassifying_region_model_is_planned_for_the_share_of_objects_it_runs_on(tmp_path: Path) -> None:
    """Objects per frame are kept per pipeline and stage; a region model that runs on a
    tracked object every 3rd frame costs a third of them per frame, and what a run of it
    observes is stored back as objects (not as its own inferences)."""
    from pipeline.costs import CostCache, ModelProbe, objects_key
    from pipeline.plan_check import PlanCheck
    from pipeline.graph_costs import Measured, with_cost
    from stages._reclassify import ONCE_PER_TRACK_SHARE, reclassified_share

    cache = CostCache(tmp_path / "costs.json", machine="test")
    cache.put(objects_key("faces", "landmarks"), 2.0)
    measured = Measured()
    for every in (1, 3, 0):
        probe = ModelProbe("landmarks", Path("m.xml"), None, "CPU", "THROUGHPUT", {}, per_frame=None,
                           per_object=reclassified_share(every))
        measured.models["landmarks"] = (2.5, "measured", probe, None)
        info = with_cost(InferInfo("landmarks"), measured, "faces", cache)
        want = {1: 2.0, 3: 2.0 / 3, 0: 2.0 * ONCE_PER_TRACK_SHARE}[every]
        assert info.objects and abs(info.per_frame - want) < 1e-9 and abs(info.frame_ms - 2.5 * want) < 1e-9
        assert info.objects_origin == "observed"
    unseen = with_cost(InferInfo("landmarks"), measured, "other-pipeline", cache)
    assert unseen.objects_origin == "assumed"
    assert plan_threads(2, 1, [unseen], decode_ms=3.0).assumed == ["objects per frame of landmarks"]
    assert plan_threads(2, 1, [info], decode_ms=3.0).assumed == []
    # a camera not yet connected beside a file: its decode cost is a guess
    assert plan_threads(2, 2, [info], decode_ms=[3.0, 4.0], decode_origin="assumed/measured").assumed == ["decode cost"]

    check = PlanCheck.__new__(PlanCheck)  # only what store() reads
    check.cache, check.pipeline, check.cameras, check.uris = cache, "faces", [], []
    check.plan = plan_threads(2, 1, [])
    check.infos = {"landmarks": InferInfo("landmarks", objects=True, per_object=1 / 3)}
    check.observed, check.result = {"per_frame": {"landmarks": 0.7}, "decode_ms": []}, {"status": "ok"}
    check.judged, check.replanned = True, None
    check.store()
    assert abs(cache.get(objects_key("faces", "landmarks")) - 2.1) < 1e-9
