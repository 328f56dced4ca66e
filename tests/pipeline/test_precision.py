"""The precision the planner compiles CPU models at: f32 where it costs no more than the
runtime's default, the user's hint where there is one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline import graph_costs, precision
from pipeline.config import load_config
from pipeline.costs import CostCache, ModelProbe
from pipeline.engine import InputSpec
from pipeline.graph import build_graph
from pipeline.threads import plan_for_graph, plan_overrides

ROOT = Path(__file__).resolve().parents[2]
SCENE = "testsrc://bars?width=640&height=360&frames=60"
HINT = "INFERENCE_PRECISION_HINT"


def _graph(name: str):
    cfg = load_config(str(ROOT / "pipelines.yaml"), check_files=False)
    return build_graph(cfg.get(name), str(ROOT / "pipelines.yaml"))


def _probe(config: dict[str, Any] | None = None, engine: str = "openvino") -> ModelProbe:
    return ModelProbe("det", Path("m.xml"), InputSpec(), "CPU", "THROUGHPUT", config or {}, engine=engine)


def _costs(default_ms: float, f32_ms: float):
    """A cost function that answers by the probe's precision, and the probes it was asked for."""
    asked: list[ModelProbe] = []

    def cost(probes: list[ModelProbe]) -> list[tuple[dict[str, Any], str]]:
        asked.extend(probes)
        return [({"ms": f32_ms if p.config.get(HINT) == "f32" else default_ms, "input_hw": [64, 64]}, "measured")
                for p in probes]

    return cost, asked


@pytest.fixture
def bf16_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "default_precision", lambda device="CPU": "bf16")


def test_f32_is_chosen_where_it_is_faster_and_on_a_tie(bf16_cpu: None) -> None:
    for default_ms, f32_ms in ((13.35, 7.14), (2.0, 2.08)):  # faster; within the 5 % margin
        cost, asked = _costs(default_ms, f32_ms)
        probe, entry, _, chosen = precision.choose(_probe(), cost)
        assert probe.config == {HINT: "f32"} and entry["ms"] == f32_ms
        assert chosen is not None and chosen.hint == "f32" and chosen.describe() == f"f32 (bf16: {default_ms:.2f} ms)"
        assert [p.config.get(HINT) for p in asked] == [None, "f32"]


def test_the_default_is_kept_where_f32_costs_more(bf16_cpu: None) -> None:
    cost, _ = _costs(2.0, 5.0)  # e.g. bf16 on AMX
    probe, entry, _, chosen = precision.choose(_probe(), cost)
    assert probe.config == {} and entry["ms"] == 2.0
    assert chosen is not None and chosen.hint is None and chosen.describe() == "bf16 (f32: 5.00 ms)"


@pytest.mark.parametrize("probe", [_probe({"inference_precision_hint": "bf16"}), _probe(engine="onnxruntime")],
                         ids=["user hint", "onnxruntime"])
def test_nothing_is_measured_where_the_choice_is_not_the_planners(bf16_cpu: None, probe: ModelProbe) -> None:
    cost, asked = _costs(13.35, 7.14)
    got, entry, _, chosen = precision.choose(probe, cost)
    assert got is probe and chosen is None and len(asked) == 1


def test_a_cpu_computing_in_f32_by_default_is_not_measured_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "default_precision", lambda device="CPU": "f32")
    assert precision.f32_probe(_probe()) is None


def test_the_plan_compiles_at_the_chosen_precision_and_the_users_hint_wins(tmp_path: Path, bf16_cpu: None,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Costs injected: f32 half the default for the face detector, twice it for the landmarks."""
    def measure(probe: ModelProbe) -> dict[str, Any]:
        f32 = probe.config.get(HINT) == "f32"
        ms = {"face_detect": (4.0, 2.0), "landmarks": (1.0, 2.0)}[probe.stage][f32]
        return {"ms": ms, "input_hw": [128, 128] if probe.stage == "face_detect" else [192, 192]}

    monkeypatch.setattr(graph_costs, "measure_models", lambda probes: [measure(p) for p in probes])
    graph = _graph("faces")
    plan = plan_for_graph(graph, [SCENE], cores=2, costs=CostCache(tmp_path / "costs.json"))
    assert plan.precision == {"face_detect": "f32"}
    assert plan.models["face_detect"]["ms"] == 2.0 and plan.models["landmarks"]["ms"] == 1.0
    assert "face_detect 2.00 ms/inference (measured) at f32 (bf16: 4.00 ms)" in plan.summary()
    assert "landmarks 1.00 ms/inference (measured) at bf16 (f32: 2.00 ms)" in plan.summary()
    out = plan_overrides(plan, graph, {})
    assert out["face_detect"]["config"][HINT] == "f32" and HINT not in out["landmarks"]["config"]

    # threads set by the user keep the measured precision; a hint set by the user is kept as set
    user = {"face_detect": {"config": {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1}},
            "landmarks": {"config": {HINT: "bf16"}}}
    plan = plan_for_graph(graph, [SCENE], cores=2, overrides=user, costs=CostCache(tmp_path / "costs.json"))
    out = plan_overrides(plan, graph, user)
    assert out["face_detect"]["config"] == {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1, HINT: "f32"}
    assert out["landmarks"]["config"][HINT] == "bf16" and "landmarks" not in plan.precision
    assert plan_overrides(plan_for_graph(graph, [SCENE], cores=0), graph, {}) == {}  # --cores 0: runtime defaults


def test_on_this_cpu_the_faster_precision_is_chosen(tmp_path: Path) -> None:
    """Real measurements of the shipped pose detector: whatever this CPU's default is, the plan
    takes f32 exactly where it costs at most 5 % more than the default."""
    plan = plan_for_graph(_graph("persons"), [SCENE], cores=2, costs=CostCache(tmp_path / "costs.json"))
    info = next(i for i in plan.infos if i.name == "person_detect")
    if precision.default_precision("CPU") == "f32":
        assert info.precision is None and plan.precision == {}
        return
    p = info.precision
    assert p is not None and p.default == precision.default_precision("CPU")
    assert (plan.precision == {"person_detect": "f32"}) == (p.f32_ms <= precision.F32_MARGIN * p.default_ms)
    assert plan.models["person_detect"]["ms"] == round(p.f32_ms if p.hint else p.default_ms, 3)
