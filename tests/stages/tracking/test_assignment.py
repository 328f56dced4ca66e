from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from stages.tracking.assignment import match, min_cost_assignment

scipy_optimize = pytest.importorskip("scipy.optimize", reason="scipy (test extra) is the reference solver")


def _total(cost: np.ndarray, pairs: np.ndarray, limit: float) -> float:
    """Pair costs plus limit/2 for every unmatched row and column."""
    n, m = cost.shape
    return float(sum(cost[r, c] for r, c in pairs) + (n + m - 2 * len(pairs)) * limit / 2)


def _reference_total(cost: np.ndarray, limit: float) -> float:
    n, m = cost.shape
    capped = np.where(np.isfinite(cost) & (cost < limit), cost, limit)
    ext = np.full((n + m, n + m), limit / 2)
    ext[:n, :m] = capped
    ext[n:, m:] = 0
    rows, cols = scipy_optimize.linear_sum_assignment(ext)
    pairs = [(r, c) for r, c in zip(rows, cols) if r < n and c < m and capped[r, c] < limit]
    return _total(cost, np.array(pairs, np.int64).reshape(-1, 2), limit)


costs = st.integers(0, 9).flatmap(lambda n: st.integers(0, 9).flatmap(
    lambda m: arrays(np.float64, (n, m), elements=st.one_of(st.floats(0, 1), st.just(np.inf)))))


@settings(max_examples=300, deadline=None)
@given(costs, st.floats(0.05, 1.0))
def test_match_is_optimal_like_scipys_solver_on_the_extended_problem(cost: np.ndarray, limit: float) -> None:
    pairs, free_rows, free_cols = match(cost, limit)
    assert _total(cost, pairs, limit) == pytest.approx(_reference_total(cost, limit), abs=1e-9)
    assert all(cost[r, c] < limit for r, c in pairs)
    assert sorted(pairs[:, 0].tolist() + free_rows.tolist()) == list(range(cost.shape[0]))
    assert sorted(pairs[:, 1].tolist() + free_cols.tolist()) == list(range(cost.shape[1]))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.integers(n, 10).flatmap(
    lambda m: arrays(np.float64, (n, m), elements=st.floats(0, 100)))))
def test_complete_assignment_has_scipys_minimal_total(cost: np.ndarray) -> None:
    assigned = min_cost_assignment(cost)
    rows, cols = scipy_optimize.linear_sum_assignment(cost)
    assert len(set(assigned.tolist())) == len(assigned)
    assert cost[np.arange(len(cost)), assigned].sum() == pytest.approx(cost[rows, cols].sum(), abs=1e-9)


def test_a_cheap_pair_is_not_given_up_for_two_expensive_ones() -> None:
    # rows 0 and 1 both like column 0; row 1 could take column 1 only at a cost near the limit
    cost = np.array([[0.1, np.inf], [0.2, 0.75]])
    pairs, _, _ = match(cost, 0.8)
    assert pairs.tolist() == [[0, 0], [1, 1]]
    pairs, free_rows, _ = match(cost, 0.7)  # now (1, 1) is not allowed: row 1 stays free
    assert pairs.tolist() == [[0, 0]] and free_rows.tolist() == [1]


def test_large_sparse_problems_are_solved_per_group() -> None:
    rng = np.random.default_rng(3)
    n = 60
    cost = np.full((n, n), np.inf)
    for i in range(n):  # each row overlaps its own column and a neighbour's
        cost[i, i] = rng.random() * 0.3
        cost[i, (i + 1) % n] = 0.5 + rng.random() * 0.2
    pairs, _, _ = match(cost, 0.8)
    assert pairs.tolist() == [[i, i] for i in range(n)]
