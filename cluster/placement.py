"""Where cameras run: an even spread over the nodes that have room.

Pure functions (no Ray): the supervisor feeds them the live nodes and the cameras
each node already hosts.  A node's room is counted in cameras: its CPUs divided by
the CPUs reserved per camera (``cpus_per_camera``), so a head node started with
``num_cpus=0`` never gets one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

__all__ = ["NodeInfo", "capacity", "spread", "imbalance"]


@dataclass(frozen=True)
class NodeInfo:
    """A Ray node as placement sees it: its id, its CPUs (Ray's ``CPU`` resource) and its address."""

    node_id: str
    cpus: float
    address: str = ""


def capacity(node: NodeInfo, cpus_per_camera: float) -> int:
    """Cameras ``node`` can host at ``cpus_per_camera`` CPUs each (0 for a node without CPUs)."""
    if cpus_per_camera <= 0:
        raise ValueError(f"cpus_per_camera must be > 0, got {cpus_per_camera}")
    return max(0, math.floor(node.cpus / cpus_per_camera + 1e-9))


def spread(cameras: Iterable[str], nodes: Iterable[NodeInfo], load: Mapping[str, int],
           cpus_per_camera: float) -> tuple[dict[str, str], list[str]]:
    """Assign ``cameras`` (in order) to ``nodes``, each to the node with the fewest cameras
    (``load``: cameras a node already hosts, counted with the ones assigned here) among those with
    room left; ties go to the node with more room, then to the earlier node.  Returns
    (camera -> node id, cameras that fit nowhere: pending).

    Where every node has room, the cameras per node differ by at most one at the end, provided
    they did before (``imbalance``)."""
    nodes = list(nodes)
    room = {n.node_id: capacity(n, cpus_per_camera) for n in nodes}
    count = {n.node_id: int(load.get(n.node_id, 0)) for n in nodes}
    order = {n.node_id: i for i, n in enumerate(nodes)}
    placed: dict[str, str] = {}
    pending: list[str] = []
    for cam in cameras:
        free = [nid for nid in count if count[nid] < room[nid]]
        if not free:
            pending.append(cam)
            continue
        best = min(free, key=lambda nid: (count[nid], -(room[nid] - count[nid]), order[nid]))
        placed[cam] = best
        count[best] += 1
    return placed, pending


def imbalance(load: Mapping[str, int], nodes: Iterable[NodeInfo], cpus_per_camera: float) -> int:
    """max - min cameras per node over the nodes that can host cameras (0 with fewer than two)."""
    counts = [int(load.get(n.node_id, 0)) for n in nodes if capacity(n, cpus_per_camera) > 0]
    return max(counts) - min(counts) if len(counts) > 1 else 0
