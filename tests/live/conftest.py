"""Fixtures for live-source tests: test RTSP servers as subprocesses on free ports, and a
fake V4L2 camera.

The RTSP server runs with Debian's ``/usr/bin/python3`` (GStreamer's RTSP server
through PyGObject).  If that interpreter cannot import it, the session installs
the Debian packages once (only as root, with timeouts); if that fails too, the
tests that need a real RTSP server are skipped with the reason.  Every server
started by a test is killed at teardown.

The fake camera is tests/live/fake_v4l2.c, built with gcc once per session and preloaded
into the vapipe subprocess (tests that need it are skipped without gcc).

Servers and cameras send the session's synthetic clip (``clip``, tests/media.py);
only the tests that look for people or faces in the pictures use the shared clips.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .helpers import (
    FACE_CLIP,
    PERSON_CLIP,
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
def rtsp_server(gst_rtsp: str, clip: Path, servers: list[Server]) -> Server:
    """A started RTSP server looping the synthetic clip in real time at rtsp://127.0.0.1:PORT/cam."""
    server = Server(gst_rtsp, "serve", free_port(), "/cam", clip)
    servers.append(server)
    return server.start()


@pytest.fixture
def person_rtsp_server(gst_rtsp: str, videos_dir: Path, servers: list[Server]) -> Server:
    """The same, looping the shared clip of people walking into view."""
    server = Server(gst_rtsp, "serve", free_port(), "/cam", videos_dir / PERSON_CLIP)
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


CameraFrames = tuple[Path, tuple[int, int], int]


@pytest.fixture(scope="session")
def camera_frames(clip: Path, tmp_path_factory: pytest.TempPathFactory) -> CameraFrames:
    """(raw YUYV file, (width, height), frames) made from the synthetic clip."""
    path = tmp_path_factory.mktemp("camera") / "frames.yuyv"
    width, height, n = write_yuyv(clip, path)
    return path, (width, height), n


@pytest.fixture(scope="session")
def face_camera_frames(videos_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> CameraFrames:
    """The same made from the shared faces clip (two faces in every frame)."""
    clip = videos_dir / FACE_CLIP
    if not clip.is_file():
        pytest.skip(f"clip {clip} not found")
    path = tmp_path_factory.mktemp("face_camera") / "frames.yuyv"
    width, height, n = write_yuyv(clip, path)
    return path, (width, height), n


def _cameras(library: Path, camera: CameraFrames, folder: Path) -> Callable[..., FakeCamera]:
    frames, size, _ = camera

    def make(device: str = "/dev/video42", fps: float = 15) -> FakeCamera:
        return FakeCamera(library, frames, size, device, fps, folder / f"{Path(device).name}.plugged")

    return make


@pytest.fixture
def fake_camera(fake_v4l2: Path, camera_frames: CameraFrames, tmp_path: Path) -> Callable[..., FakeCamera]:
    """fake_camera(device="/dev/video42", fps=15) -> a plugged-in FakeCamera looping the synthetic clip."""
    return _cameras(fake_v4l2, camera_frames, tmp_path)


@pytest.fixture
def face_camera(fake_v4l2: Path, face_camera_frames: CameraFrames, tmp_path: Path) -> Callable[..., FakeCamera]:
    """face_camera(device="/dev/video42", fps=15) -> a plugged-in FakeCamera looping the faces clip."""
    return _cameras(fake_v4l2, face_camera_frames, tmp_path)
