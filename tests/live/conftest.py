"""Fixtures for live-source tests: test RTSP servers as subprocesses on free ports, and a
fake V4L2 camera.

The RTSP server runs with Debian's ``/usr/bin/python3`` (GStreamer's RTSP server
through PyGObject).  If that interpreter cannot import it, the session installs
the Debian packages once (only as root, with timeouts); if that fails too, the
tests that need a real RTSP server are skipped with the reason.  Every server
started by a test is killed at teardown.

The fake camera is tests/live/fake_v4l2.c, built with gcc once per session and preloaded
into the vapipe subprocess (tests that need it are skipped without gcc).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .helpers import (
    CLIP,
    FACE_CLIP,
    SYSTEM_PYTHON,
    FakeCamera,
    HttpServer,
    Server,
    build_fake_v4l2,
    free_port,
    gst_available,
    write_yuyv,
)


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


@pytest.fixture(scope="session")
def fake_v4l2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake V4L2 camera library (tests/live/fake_v4l2.c), built once per session."""
    import av

    if not any("v4l2" in name.split(",") for name in av.formats_available):
        pytest.skip("this PyAV build has no v4l2 demuxer")
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: cannot build the fake v4l2 camera (tests/live/fake_v4l2.c)")
    return build_fake_v4l2(gcc, tmp_path_factory.mktemp("fake_v4l2"))


@pytest.fixture(scope="session")
def camera_frames(videos_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, int], int]:
    """(raw YUYV file, (width, height), frames) made from the faces clip."""
    clip = videos_dir / FACE_CLIP
    if not clip.is_file():
        pytest.skip(f"clip {clip} not found")
    path = tmp_path_factory.mktemp("camera") / "frames.yuyv"
    width, height, n = write_yuyv(clip, path)
    return path, (width, height), n


@pytest.fixture
def fake_camera(fake_v4l2: Path, camera_frames, tmp_path: Path) -> Callable[..., FakeCamera]:
    """fake_camera(device="/dev/video42", fps=15) -> a plugged-in FakeCamera looping the faces clip."""
    frames, size, _ = camera_frames

    def make(device: str = "/dev/video42", fps: float = 15) -> FakeCamera:
        return FakeCamera(fake_v4l2, frames, size, device, fps, tmp_path / f"{Path(device).name}.plugged")

    return make
