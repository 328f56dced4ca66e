"""Costs the planner works from: measured on this machine, cached per machine, used on the next start."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline import costs, graph_costs, measure, threads
from pipeline.config import load_config
from pipeline.costs import CostCache, ModelProbe
from pipeline.measure import measure_model
from pipeline.engine import InputSpec
from pipeline.graph import build_graph

ROOT = Path(__file__).resolve().parents[2]
SCENE = "testsrc://bars?width=640&height=360&frames=60"


def _graph(name: str):
    cfg = load_config(str(ROOT / "pipelines.yaml"), check_files=False)
    return build_graph(cfg.get(name), str(ROOT / "pipelines.yaml"))


def _conv_model(path: Path, channels: int) -> Path:
    """A 3x3 convolution stack on a 3x64x64 input, written as OpenVINO IR."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3, 64, 64], np.float32, name="image")
    y = x
    c_in = 3
    rng = np.random.default_rng(0)
    for _ in range(3):
        w = ops.constant(rng.standard_normal((channels, c_in, 3, 3)).astype(np.float32) * 0.1)
        y = ops.relu(ops.convolution(y, w, [1, 1], [1, 1], [1, 1], [1, 1]))
        c_in = channels
    ov.save_model(ov.Model([y], [x], "convs"), str(path))
    return path


def test_a_model_is_timed_on_one_thread_and_bigger_work_costs_more(tmp_path: Path) -> None:
    spec = InputSpec(host_color="RGB", model_color="RGB")
    small = measure_model(ModelProbe("s", _conv_model(tmp_path / "small.xml", 8), spec, "CPU", "THROUGHPUT", {}))
    big = measure_model(ModelProbe("b", _conv_model(tmp_path / "big.xml", 64), spec, "CPU", "THROUGHPUT", {}))
    assert small["input_hw"] == [64, 64] and small["ms"] > 0
    # 64 channels do ~60x the multiply-adds of 8; the timing must see it (CPU time, not wall time)
    assert big["ms"] > 4 * small["ms"], (small, big)


def test_a_model_fed_whole_frames_is_timed_on_an_input_that_outlives_the_set_up(tmp_path: Path) -> None:
    """Scaled inside the model, a 4K frame is fed whole: its input must stay alive while the
    runner is used (freed, its own memory mapping is gone and the inference crashed)."""
    import subprocess
    import sys

    model = _conv_model(tmp_path / "m.xml", 8)
    script = f"""
import gc
from pathlib import Path
from pipeline.costs import ModelProbe
from pipeline.engine import InputSpec
from pipeline.measure import _model_runner
spec = InputSpec(host_color="RGB", model_color="RGB", resize_from=(2160, 3840))
run, fed = _model_runner(ModelProbe("s", Path({str(model)!r}), spec, "CPU", "THROUGHPUT", {{}}))
gc.collect()
for _ in range(3):
    run()
print(fed)
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == ["[64,", "64]"]


def test_compilations_compared_are_measured_in_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The precision choice compares two compilations: one inference of each in turn, so that a
    slow moment of the host falls on both; both go into the cache, and then come from it."""
    order: list[str] = []

    def runner(probe: ModelProbe):
        return (lambda: order.append(probe.stage)), [8, 8]

    monkeypatch.setattr(measure, "_model_runner", runner)
    probes = [ModelProbe(n, Path("m.xml"), InputSpec(), "CPU", "THROUGHPUT", {"k": n}) for n in ("bf16", "f32")]
    assert [e["input_hw"] for e in measure.measure_models(probes)] == [[8, 8], [8, 8]]
    assert len(order) >= 2 * measure.MIN_SAMPLES and order == ["bf16", "f32"] * (len(order) // 2)
    cache = CostCache(tmp_path / "costs.json")
    fresh = costs.model_costs(probes, cache, lambda ps: [{"ms": 1.0 + i, "input_hw": [8, 8]} for i, _ in enumerate(ps)])
    assert [(e["ms"], o) for e, o in fresh] == [(1.0, "measured"), (2.0, "measured")]
    again = costs.model_costs(probes, CostCache(tmp_path / "costs.json"), lambda ps: pytest.fail("measured again"))
    assert [(e["ms"], o) for e, o in again] == [(1.0, "cached"), (2.0, "cached")]


def test_the_second_start_measures_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _graph("persons")
    first_cache = CostCache(tmp_path / "costs.json")
    first = threads.plan_for_graph(graph, [SCENE], cores=2, costs=first_cache)
    assert first_cache.measurements >= 2  # the scene's decode and the pose model
    assert first.decode_origin == "measured" and first.models["person_detect"]["origin"] == "measured"

    def refuse(*_a, **_k):
        raise AssertionError("measured again although the costs are cached")

    for name in ("measure_models", "measure_decode", "measure_host"):
        monkeypatch.setattr(graph_costs, name, refuse)
    second_cache = CostCache(tmp_path / "costs.json")
    second = threads.plan_for_graph(graph, [SCENE], cores=2, costs=second_cache)
    assert second_cache.measurements == 0 and second_cache.hits >= 3
    assert second.decode_origin == "cached" and second.models["person_detect"]["origin"] == "cached"
    assert second.infer == first.infer and second.precision == first.precision
    assert second.decode_ms == pytest.approx(first.decode_ms, abs=1e-3)
    assert second.host_ms == pytest.approx(first.host_ms, abs=1e-3)
    assert "(cached)" in second.summary()


def test_costs_are_kept_per_machine(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    CostCache(path, machine="cpu A").put("model|x", {"ms": 3.0})
    CostCache(path, machine="cpu B").put("model|x", {"ms": 12.0})
    assert CostCache(path, machine="cpu A").get("model|x") == {"ms": 3.0}
    assert CostCache(path, machine="cpu B").get("model|x") == {"ms": 12.0}
    assert CostCache(path, machine="cpu C").get("model|x") is None
    assert "avx" in CostCache(path).machine or "[" in CostCache(path).machine  # vector extensions are part of it


def test_a_folder_as_the_cache_keeps_costs_json_in_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAPIPE_COST_CACHE", str(tmp_path))
    CostCache(machine="cpu").put("model|x", {"ms": 3.0})
    assert json.loads((tmp_path / "costs.json").read_text())["machines"]["cpu"] == {"model|x": {"ms": 3.0}}
    assert CostCache(machine="cpu").get("model|x") == {"ms": 3.0}


def test_a_cache_that_cannot_be_written_is_named_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    cache = CostCache(blocker / "costs.json", machine="cpu")
    with caplog.at_level("WARNING", logger="vapipe.costs"):
        cache.put("model|x", {"ms": 3.0})
        cache.put("model|y", {"ms": 4.0})
    warned = [r.getMessage() for r in caplog.records if "cannot write the cost cache" in r.getMessage()]
    assert len(warned) == 1 and str(blocker / "costs.json") in warned[0], warned
    assert cache.get("model|y") == {"ms": 4.0}  # still kept for this run


def test_the_cache_keeps_the_most_recently_used_costs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs, "MAX_ENTRIES", 4)
    path = tmp_path / "costs.json"
    cache = CostCache(path, machine="cpu")
    for i in range(4):
        cache.put(f"decode|clip{i}", {"ms": float(i)})
    later = CostCache(path, machine="cpu")         # another start
    assert later.get("decode|clip0") == {"ms": 0.0}  # used again: now the most recent
    later.put("decode|clip4", {"ms": 4.0})         # one too many: the least recently used goes
    kept = CostCache(path, machine="cpu")
    assert [kept.get(f"decode|clip{i}") is not None for i in range(5)] == [True, False, True, True, True]
    assert len(json.loads(path.read_text())["machines"]["cpu"]) == 4


def test_a_process_never_writes_back_costs_another_one_has_renewed(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    CostCache(path, machine="cpu").put("host|a", 1.0)
    slow = CostCache(path, machine="cpu")   # started when host|a was 1.0
    CostCache(path, machine="cpu").put("host|a", 2.0)
    slow.put("host|b", 3.0)
    fresh = CostCache(path, machine="cpu")
    assert (fresh.get("host|a"), fresh.get("host|b")) == (2.0, 3.0)
    assert slow.get("host|a") == 2.0        # and the slow one reads what was written meanwhile


def _clip(path: Path, width: int, height: int, frames: int = 30) -> str:
    """An H.264 clip of moving noise (hard to compress, so decoding has work to do)."""
    import av

    rng = np.random.default_rng(3)
    tile = rng.integers(0, 256, (height // 4, width // 4, 3), dtype=np.uint8)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "23"}
        for i in range(frames):
            img = np.kron(np.roll(tile, i, axis=1), np.ones((4, 4, 1), np.uint8))
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return str(path)


def test_decode_cost_grows_with_the_picture(tmp_path: Path) -> None:
    graph = _graph("persons")
    cache = CostCache(tmp_path / "c.json")
    small = threads.plan_for_graph(graph, [_clip(tmp_path / "s.mp4", 320, 180)], cores=2, costs=cache)
    large = threads.plan_for_graph(graph, [_clip(tmp_path / "l.mp4", 1280, 720)], cores=2, costs=cache)
    # 16x the pixels: decoding takes several times longer per frame (thread CPU time; 5-8x on a
    # quiet 2-core machine, 3.9x measured while another test file ran beside it)
    assert large.decode_ms[0] > 2.5 * small.decode_ms[0], (small.decode_ms, large.decode_ms)


def test_what_cannot_be_measured_is_assumed_and_the_run_reports_it(tmp_path: Path) -> None:
    graph = _graph("persons")
    overrides = {"person_detect": {"model": str(tmp_path / "missing.tflite")}}
    plan = threads.plan_for_graph(graph, [str(tmp_path / "missing.mp4")], cores=2, overrides=overrides,
                                  costs=CostCache(tmp_path / "c.json"))
    assert plan.decode_origin == "assumed" and plan.models["person_detect"]["origin"] == "assumed"
    assert plan.infer["person_detect"]["INFERENCE_NUM_THREADS"] >= 1


def test_the_host_work_a_run_observed_is_planned_with_on_the_next_start(tmp_path: Path) -> None:
    """Input preparation alone underestimates a worker's work (postprocessing, region crops, other
    stages); a run keeps what it observed, per pipeline settings and frame size, and the next
    start of the same settings plans with it."""
    from pipeline.plan_check import PlanCheck

    graph = _graph("persons")
    cache = CostCache(tmp_path / "costs.json")
    first = threads.plan_for_graph(graph, [SCENE], cores=2, costs=cache)
    assert first.host_origin == "measured" and first.host_key and first.host_key.endswith("|640x360")

    check = PlanCheck(first, [], pipeline="persons", uris=[SCENE], cache=cache)
    check.observed = {"host_ms": first.host_ms + 2.5, "per_frame": {}, "decode_ms": []}
    first.encoders = {"encode": {"threads": 1, "ms": 0.5}}  # encoding on the worker is counted apart
    check.store()

    second = threads.plan_for_graph(graph, [SCENE], cores=2, costs=CostCache(tmp_path / "costs.json"))
    assert second.host_origin == "observed" and second.host_ms == pytest.approx(first.host_ms + 2.0, abs=1e-3)
    assert second.predicted_fps < first.predicted_fps  # more work per frame, a lower rate
    assert "(observed)" in second.summary()
    other = threads.plan_for_graph(graph, [SCENE], cores=2, overrides={"person_detect": {"every": 3}},
                                   costs=CostCache(tmp_path / "costs.json"))
    assert other.host_origin == "measured" and other.host_key != first.host_key


def test_cameras_streams_and_real_time_files_count_as_paced() -> None:
    from pipeline.graph_costs import _paced

    graph = _graph("persons")
    assert not _paced(graph, SCENE, None)
    assert _paced(graph, SCENE, {"decode": {"realtime": True}})
    assert _paced(graph, "rtsp://127.0.0.1:8554/cam", None)


def test_a_camera_that_is_down_does_not_hold_up_the_plan(tmp_path: Path) -> None:
    """A stream is not read to measure the host work before the run connects: a camera that
    refuses connections would be retried forever, out of reach of Ctrl-C."""
    import socket
    import threading

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    graph = _graph("persons")
    plans: list = []
    worker = threading.Thread(target=lambda: plans.append(threads.plan_for_graph(
        graph, [f"rtsp://127.0.0.1:{port}/cam"], cores=2, costs=CostCache(tmp_path / "c.json"))), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "planning kept retrying a camera that is down"
    assert plans[0].decode_origin == "assumed" and plans[0].host_origin == "assumed"
