"""Even placement over the nodes with room, and cameras left pending when none has any."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cluster.placement import NodeInfo, capacity, imbalance, spread


def test_head_without_cpus_gets_no_camera_and_spread_is_even() -> None:
    nodes = [NodeInfo("head", 0.0), NodeInfo("a", 1.0), NodeInfo("b", 1.0), NodeInfo("c", 1.0)]
    placed, pending = spread([f"cam{i}" for i in range(8)], nodes, {}, 0.25)
    load = {n: list(placed.values()).count(n) for n in ("head", "a", "b", "c")}
    assert load == {"head": 0, "a": 3, "b": 3, "c": 2} and not pending


def test_orphans_of_a_lost_node_fill_the_least_loaded_nodes_first() -> None:
    nodes = [NodeInfo("b", 1.0), NodeInfo("c", 1.0)]
    placed, pending = spread(["x", "y", "z"], nodes, {"b": 3, "c": 2}, 0.25)
    assert placed["x"] == "c" and sorted(placed.values()) == ["b", "c", "c"] and not pending


def test_cameras_beyond_capacity_wait() -> None:
    nodes = [NodeInfo("b", 1.0), NodeInfo("c", 1.0)]
    placed, pending = spread(["x", "y", "z"], nodes, {"b": 3, "c": 3}, 0.3)  # 3 per node: 1 free nowhere
    assert placed == {} and pending == ["x", "y", "z"]
    placed, pending = spread(["x", "y", "z"], nodes, {"b": 2, "c": 3}, 0.3)
    assert placed == {"x": "b"} and pending == ["y", "z"]


@given(cpus=st.lists(st.sampled_from([0.0, 1.0, 2.0, 4.0, 64.0]), min_size=1, max_size=6),
       cameras=st.integers(0, 60), per_camera=st.sampled_from([0.25, 0.5, 1.0, 2.0]),
       existing=st.lists(st.integers(0, 3), max_size=6))
def test_spread_properties(cpus: list[float], cameras: int, per_camera: float, existing: list[int]) -> None:
    nodes = [NodeInfo(f"n{i}", c) for i, c in enumerate(cpus)]
    load = {n.node_id: min(existing[i] if i < len(existing) else 0, capacity(n, per_camera))
            for i, n in enumerate(nodes)}
    names = [f"cam{i}" for i in range(cameras)]
    placed, pending = spread(names, nodes, load, per_camera)
    assert set(placed) | set(pending) == set(names) and len(placed) + len(pending) == len(names)
    after = dict(load)
    for node in placed.values():
        after[node] += 1
    for n in nodes:  # never over a node's room
        assert after[n.node_id] <= capacity(n, per_camera)
    if pending:  # cameras wait only when every node is full
        assert all(after[n.node_id] == capacity(n, per_camera) for n in nodes)
    if not any(load.values()) and not pending:
        # from empty nodes, wherever every node still had room, the counts differ by at most one
        roomy = [n for n in nodes if after[n.node_id] < capacity(n, per_camera)]
        if len(roomy) == len([n for n in nodes if capacity(n, per_camera) > 0]):
            assert imbalance(after, nodes, per_camera) <= 1
