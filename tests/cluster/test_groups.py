"""What an actor holds of its node's CPUs, as placement counts it (no Ray needed)."""

from __future__ import annotations

from cluster.groups import ActorGroup
from cluster.records import CameraRecord


def _cameras(states: dict[str, str], group: str = "g1") -> dict[str, CameraRecord]:
    return {n: CameraRecord(n, f"file-{n}.mp4", False, state=s, group=group) for n, s in states.items()}


def test_an_actor_holds_what_it_reserved_less_its_running_cameras() -> None:
    cams = _cameras({"a": "running", "b": "starting", "c": "done", "d": "stopped"})
    g = ActorGroup("g1", actor=None, node="n1", cameras=list(cams), cpus=4.0, ref=None)
    assert g.cpus_held() == 4.0                    # another run's actor: all it reserved
    assert g.cpus_held(cams, 1.0) == 2.0           # this run's: the ended cameras' CPUs stay held
    assert g.cpus_held(cams, 3.0) == 0.0           # never below zero
    cams["a"].group = "g2"                         # moved to another actor: no longer running on this one
    assert g.cpus_held(cams, 1.0) == 3.0
    g.gone = True
    assert g.cpus_held() == 0.0 and g.cpus_held(cams, 1.0) == 0.0
