"""Minimum-cost matching of rows (tracks) to columns (detections) with a cost limit.

:func:`match` pairs rows and columns so that the total cost is minimal, where
leaving a row or a column unmatched costs ``limit / 2`` each: a pair is only
made when its cost is below ``limit``, and a cheap pair is never given up for
an expensive one.  This is the problem ByteTrack solves with ``lapjv`` and a
cost limit; here it is solved exactly with the Hungarian method (shortest
augmenting paths with potentials), written in NumPy so that the core has no
extra dependency.  Independent groups of rows and columns (no cost below the
limit between them) are solved separately, which keeps crowded scenes cheap:
most tracks overlap one or two detections.

Deterministic: ties go to the lowest index.
"""

from __future__ import annotations

import numpy as np

__all__ = ["match", "min_cost_assignment"]

#: problems up to this many cells are solved whole; larger ones per connected group
SOLVE_WHOLE = 400


def min_cost_assignment(cost: np.ndarray) -> np.ndarray:
    """For a finite (n, m) cost matrix with n <= m, the column of each row in a
    complete assignment of minimal total cost: (n,) int64."""
    cost = np.asarray(cost, np.float64)
    n, m = cost.shape
    if n > m:
        raise ValueError(f"min_cost_assignment needs rows <= columns, got {cost.shape}")
    # Potentials u (rows) and v (columns), 1-based with a virtual column 0; owner[j] is the
    # row (1-based, 0 = none) assigned to column j.  Each row is added by growing a tree of
    # tight edges from it until a free column is reached, then flipping the path.
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    owner = np.zeros(m + 1, np.int64)
    back = np.zeros(m + 1, np.int64)
    for row in range(1, n + 1):
        owner[0] = row
        col = 0
        slack = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, bool)
        while True:
            used[col] = True
            r = owner[col]
            reduced = cost[r - 1] - u[r] - v[1:]
            free = ~used[1:]
            better = free & (reduced < slack[1:])
            slack[1:][better] = reduced[better]
            back[1:][better] = col
            candidates = np.where(free, slack[1:], np.inf)
            nxt = int(np.argmin(candidates)) + 1
            delta = candidates[nxt - 1]
            u[owner[used]] += delta
            v[used] -= delta
            slack[~used] -= delta
            col = nxt
            if owner[col] == 0:
                break
        while col:  # flip the augmenting path
            prev = back[col]
            owner[col] = owner[prev]
            col = prev
    assigned = np.full(n, -1, np.int64)
    for j in range(1, m + 1):
        if owner[j]:
            assigned[owner[j] - 1] = j - 1
    return assigned


def match(cost: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Optimal pairs of rows and columns whose cost is below ``limit``.

    Returns (pairs (K, 2) int64 of (row, column), unmatched rows, unmatched columns),
    each sorted.  Non-finite costs never pair.
    """
    cost = np.asarray(cost, np.float64)
    n, m = cost.shape
    allowed = np.isfinite(cost) & (cost < limit)
    pairs: list[tuple[int, int]] = []
    row_options = allowed.sum(axis=1)
    col_options = allowed.sum(axis=0)
    if (row_options <= 1).all() and (col_options <= 1).all():  # no conflicts (the usual case)
        rows, cols = np.nonzero(allowed)
        pairs = list(zip(rows.tolist(), cols.tolist()))
    else:
        groups = _groups(allowed) if n * m > SOLVE_WHOLE else [(list(range(n)), list(range(m)))]
        for rows_, cols_ in groups:
            pairs.extend(_solve(cost, allowed, rows_, cols_, limit))
    pairs.sort()
    out = np.array(pairs, np.int64).reshape(-1, 2)
    free_rows = np.ones(n, bool)
    free_rows[out[:, 0]] = False
    free_cols = np.ones(m, bool)
    free_cols[out[:, 1]] = False
    return out, np.flatnonzero(free_rows), np.flatnonzero(free_cols)


def _solve(cost: np.ndarray, allowed: np.ndarray, rows: list[int], cols: list[int],
           limit: float) -> list[tuple[int, int]]:
    """Optimal allowed pairs among ``rows`` and ``cols``.

    A complete assignment of the smaller side where forbidden pairs cost ``limit``: with k
    allowed pairs its total is (their cost) - k * limit + constant, the same objective as
    leaving each unmatched row and column at limit / 2.
    """
    if len(rows) == 1 and len(cols) == 1:
        return [(rows[0], cols[0])] if allowed[rows[0], cols[0]] else []
    sub = np.where(allowed[np.ix_(rows, cols)], cost[np.ix_(rows, cols)], limit)
    flip = len(rows) > len(cols)
    assigned = min_cost_assignment(sub.T if flip else sub)
    pairs = []
    for i, j in enumerate(assigned.tolist()):
        r, c = (rows[j], cols[i]) if flip else (rows[i], cols[j])
        if allowed[r, c]:
            pairs.append((r, c))
    return pairs


def _groups(allowed: np.ndarray) -> list[tuple[list[int], list[int]]]:
    """Connected groups (rows, columns) of the bipartite graph of allowed pairs, by lowest row."""
    n, m = allowed.shape
    seen_rows = np.zeros(n, bool)
    seen_cols = np.zeros(m, bool)
    groups = []
    for start in range(n):
        if seen_rows[start] or not allowed[start].any():
            continue
        rows, cols = [start], []
        seen_rows[start] = True
        frontier = [start]
        while frontier:
            new_cols = np.flatnonzero(allowed[frontier].any(axis=0) & ~seen_cols)
            seen_cols[new_cols] = True
            cols.extend(new_cols.tolist())
            new_rows = np.flatnonzero(allowed[:, new_cols].any(axis=1) & ~seen_rows) if len(new_cols) else []
            seen_rows[new_rows] = True
            rows.extend(np.asarray(new_rows).tolist())
            frontier = list(np.asarray(new_rows).tolist())
        groups.append((sorted(rows), sorted(cols)))
    return groups
