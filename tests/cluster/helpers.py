"""A real multi-node Ray cluster on this machine, and small clips for its cameras."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

#: node loss is detected after 3 missed health checks 0.5 s apart (Ray's default: 5 x 3 s)
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                      "health_check_timeout_ms": 500, "health_check_failure_threshold": 3}
OBJECT_STORE = 80 * 1024 * 1024  # bytes per node (Ray's minimum is about 75 MiB)


def enable_token_auth() -> dict[str, str | None]:
    """Token authentication for the cluster this process starts (as Ray 2.59+ does for local
    clusters): a fresh token in RAY_AUTH_TOKEN, inherited by the nodes; returns the previous values."""
    from cluster.connect import use_token_mode

    before = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    use_token_mode()
    return before


def restore_env(before: dict[str, str | None]) -> None:
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def start_cluster(workers: int, cpus: float = 1.0) -> Any:
    """A head without CPUs (no camera lands there), no dashboard, and ``workers`` nodes of ``cpus`` CPUs."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": OBJECT_STORE,
        "_system_config": FAST_HEALTH_CHECKS})
    for _ in range(workers):
        cluster.add_node(wait=False, num_cpus=cpus, object_store_memory=OBJECT_STORE)
    cluster.wait_for_nodes(timeout=120)
    return cluster


def make_clip(path: Path, frames: int, size: tuple[int, int] = (320, 240), fps: int = 25, gop: int = 25) -> Path:
    """An H.264 clip whose every frame differs (a bar moves, the grey level changes), IDR every ``gop`` frames."""
    import numpy as np

    from tests.media import encode_images

    width, height = size

    def image(i: int) -> np.ndarray:
        img = np.full((height, width, 3), (i * 5) % 200 + 20, np.uint8)
        x = (i * 3) % (width - 16)
        img[:, x:x + 16] = (255, 128, 0)
        return img

    return encode_images(path, (image(i) for i in range(frames)), fps,
                         {"g": str(gop), "preset": "veryfast", "crf": "30"})


#: decode paced like a camera (25 fps) -> MP4 -> JSON Lines: no model, light enough for many cameras
LIGHT_CONFIG = """\
pipelines:
  cams:
    description: Paced cameras to an MP4 and JSON Lines each
    stages:
      - {name: decode, type: decode, params: {realtime: true}}
      - {name: encode, type: encode, params: {preset: ultrafast}}
      - {name: metadata, type: metadata}
"""


def check_outputs(folder: Path, name: str, frames: int, placements: int = 1, in_flight: int = 0) -> None:
    """Camera ``name``'s JSON Lines hold frames 0..frames-1 once each, after a ``placed`` line per placement,
    and its MP4 segments (one per placement) all play and hold them, but for at most ``in_flight`` frames
    per lost placement (in its encoder when the process died)."""
    import json

    import av

    lines = [json.loads(line) for line in (folder / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["part"] for r in lines if r.get("event") == "placed"] == list(range(placements)), name
    seqs = [r["seq"] for r in lines if "event" not in r]
    assert seqs == list(range(frames)), (name, len(seqs), frames)
    segments = [folder / f"{name}.mp4", *sorted(folder.glob(f"{name}.from*.mp4"))]
    assert len(segments) == placements, segments
    decoded = 0
    for path in segments:
        with av.open(str(path)) as video:
            decoded += sum(1 for _ in video.decode(video=0))
    assert frames - in_flight * (placements - 1) <= decoded <= frames, (name, decoded, frames)
