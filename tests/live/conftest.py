"""Fixtures for live-source tests: test RTSP servers as subprocesses on free ports.

The RTSP server runs with Debian's ``/usr/bin/python3`` (GStreamer's RTSP server
through PyGObject).  If that interpreter cannot import it, the session installs
the Debian packages once (only as root, with timeouts); if that fails too, the
tests that need a real RTSP server are skipped with the reason.  Every server
started by a test is killed at teardown.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

from .helpers import CLIP, SYSTEM_PYTHON, HttpServer, Server, free_port, gst_available


@pytest.fixture(scope="session")
def gst_rtsp() -> str:
    """The interpreter that runs the GStreamer RTSP server (installed on first use if needed)."""
    reason = gst_available()
    if reason != "ok":
        pytest.skip(f"GStreamer RTSP server unavailable for {SYSTEM_PYTHON}: {reason}")
    return SYSTEM_PYTHON


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Servers registered here are stopped (SIGCONT + SIGKILL) at teardown, whatever happened."""
    started: list[Server] = []
    yield started
    for s in started:
        s.stop()


@pytest.fixture
def clip(videos_dir: Path) -> Path:
    path = videos_dir / CLIP
    if not path.is_file():
        pytest.skip(f"clip {path} not found")
    return path


@pytest.fixture
def rtsp_server(gst_rtsp: str, clip: Path, servers: list[Server]) -> Server:
    """A started RTSP server looping the clip in real time at rtsp://127.0.0.1:PORT/cam."""
    server = Server(gst_rtsp, "serve", free_port(), "/cam", clip)
    servers.append(server)
    return server.start()


@pytest.fixture
def make_server(servers: list[Server]) -> Callable[[str], Server]:
    """make_server(mode) -> a started stall server (``accept`` or ``describe``; plain Python)."""

    def make(mode: str) -> Server:
        server = Server(sys.executable, mode, free_port())
        servers.append(server)
        return server.start()

    return make


@pytest.fixture
def http_server(servers: list[Server]) -> Callable[..., HttpServer]:
    """http_server(mode, path, *args) -> a started tests/live/http_server.py (``mjpeg`` or
    ``files``) at http://127.0.0.1:PORT/path; killed at teardown."""

    def make(mode: str, path: str, *args: str) -> HttpServer:
        server = HttpServer(mode, free_port(), path, list(args))
        servers.append(server)
        return server.start()

    return make


@pytest.fixture
def config(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The test module's ``CONFIG`` pipelines text written to a file."""
    path = tmp_path / "live.yaml"
    path.write_text(request.module.CONFIG, encoding="utf-8")
    return path
