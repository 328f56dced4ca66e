"""vapipe's tracker against Roboflow's ByteTrack on the TUD pedestrian ground truth, both scored
with py-motmetrics (see mot.py for the noise model).  ``python -m tests.bench.tracker_peer``
prints the full table (more seeds and miss rates)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("motmetrics", reason="needs py-motmetrics (test extra)")
pytest.importorskip("trackers", reason="needs Roboflow's trackers (test extra)")

from tests.stages.tracking import mot  # noqa: E402

SEEDS = range(8)  # each seed also draws the miss rate, 10-20 %


@pytest.mark.parametrize("seq", mot.SEQUENCES)
def test_metric_computation_reproduces_motmetrics_published_numbers(seq: str) -> None:
    got = mot.score(mot.load(seq), mot.load(seq, "test"))
    for name, want in mot.PUBLISHED[seq].items():
        if isinstance(want, int):
            assert got[name] == want, name
        else:  # published with three decimals
            assert got[name] == pytest.approx(want, abs=5e-4), name


def aggregate(runs: list[dict[str, float]]) -> dict[str, float]:
    """Mean MOTA and IDF1, total id switches over seeds."""
    return {"mota": float(np.mean([r["mota"] for r in runs])), "idf1": float(np.mean([r["idf1"] for r in runs])),
            "num_switches": float(sum(r["num_switches"] for r in runs))}


def compare(seq: str, miss: float | None = None, seeds: range = SEEDS) -> dict[str, dict[str, float]]:
    """Aggregated scores of vapipe, the peer with its defaults and the peer with vapipe's thresholds."""
    gt = mot.load(seq)
    runs: dict[str, list[dict[str, float]]] = {"vapipe": [], "peer_defaults": [], "peer_vapipe_thresholds": []}
    for seed in seeds:
        stream = mot.noisy_stream(gt, seed, miss=miss)
        runs["vapipe"].append(mot.score(gt, mot.run_vapipe(stream)))
        runs["peer_defaults"].append(mot.score(gt, mot.run_peer(stream)))
        runs["peer_vapipe_thresholds"].append(mot.score(gt, mot.run_peer(stream, **mot.peer_kwargs_like_vapipe())))
    return {name: aggregate(r) for name, r in runs.items()}


@pytest.mark.parametrize("seq", mot.SEQUENCES)
def test_tracker_scores_at_least_as_well_as_bytetrack(seq: str) -> None:
    result = compare(seq)
    ours = result.pop("vapipe")
    better = max(result.values(), key=lambda r: (r["mota"], r["idf1"]))
    print(seq, {"vapipe": ours, **result})
    assert ours["mota"] >= better["mota"] - 0.01
    assert ours["idf1"] >= better["idf1"] - 0.01
    assert ours["num_switches"] <= better["num_switches"]


def test_same_input_gives_the_same_ids() -> None:
    gt = mot.load("TUD-Campus")
    stream = mot.noisy_stream(gt, seed=5)
    a, b = mot.run_vapipe(stream), mot.run_vapipe(stream)
    assert all(np.array_equal(a.frames[f][0], b.frames[f][0]) for f in gt.numbers)
    ids = np.unique(np.concatenate([a.frames[f][0] for f in gt.numbers]))
    assert ids.tolist() == list(range(1, len(ids) + 1))  # from 1, no gaps
