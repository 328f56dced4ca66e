"""Fixtures for the cluster tests: a real Ray cluster of several nodes on this machine (head
without CPUs, worker nodes of 1 CPU, token authentication on), the driver connected to it, and
small generated clips.  Everything started here is shut down at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live.helpers import SYSTEM_PYTHON, Server, free_port, gst_available

from .helpers import enable_token_auth, make_clip, restore_env, start_cluster

WORKERS = 3


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[Any]:
    """A head (0 CPUs) and WORKERS nodes of 1 CPU; this process connected as the driver.  Shared by
    the modules here (starting a cluster takes 20-40 s on 2 busy cores); the node-kill test, which
    removes a node, runs last."""
    ray = pytest.importorskip("ray", reason="the cluster tests need Ray (pip install 'vapipe[cluster]')")
    from cluster.connect import connect

    before = enable_token_auth()
    cluster = start_cluster(WORKERS)
    try:
        connect(cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        restore_env(before)


@pytest.fixture(scope="package")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """H.264 clips, 320x240 at 25 fps, an IDR frame every second: ``long`` (250 frames), ``short`` (60)."""
    folder = tmp_path_factory.mktemp("clips")
    return {"long": make_clip(folder / "long.mp4", 250), "short": make_clip(folder / "short.mp4", 60)}


@pytest.fixture
def rtsp_servers(clips: dict[str, Path]) -> Iterator[list[Server]]:
    """Two RTSP cameras (tests/live/rtsp_server.py looping the long clip in real time)."""
    reason = gst_available()
    if reason != "ok":
        pytest.skip(f"GStreamer RTSP server unavailable for {SYSTEM_PYTHON}: {reason}")
    servers = [Server(SYSTEM_PYTHON, "serve", free_port(), "/cam", clips["long"]) for _ in range(2)]
    try:
        for s in servers:
            s.start()
        yield servers
    finally:
        for s in servers:
            s.stop()
