"""Helpers for live-source tests and the soak benchmark: test servers, CLI runs, JSONL."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SERVER = HERE / "rtsp_server.py"
HTTP_SERVER = HERE / "http_server.py"
SYSTEM_PYTHON = os.environ.get("VAPIPE_GST_PYTHON", "/usr/bin/python3")
DEBIAN_PACKAGES = ["python3-gi", "gir1.2-gst-rtsp-server-1.0", "gstreamer1.0-plugins-base",
                   "gstreamer1.0-plugins-good", "gstreamer1.0-plugins-bad"]
PERSON_CLIP = "one-by-one-person-detection.mp4"  # shared: 768x432 H.264, 10 fps, people from frame ~62

_PROBE = ("import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
          "from gi.repository import Gst, GstRtspServer; Gst.init(None); "
          "missing = [e for e in ('qtdemux', 'h264parse', 'rtph264pay', 'appsrc', 'appsink') "
          "if Gst.ElementFactory.find(e) is None]; "
          "print('missing: ' + ' '.join(missing) if missing else 'ok')")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe() -> str:
    if not Path(SYSTEM_PYTHON).exists():
        return f"{SYSTEM_PYTHON} not found"
    try:
        r = subprocess.run([SYSTEM_PYTHON, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "probing GStreamer timed out"
    out = r.stdout.strip()
    if r.returncode == 0 and out == "ok":
        return "ok"
    return out or (r.stderr.strip().splitlines() or ["cannot import GstRtspServer"])[-1]


def _install() -> str:
    """apt-get update once, then install the packages; returns '' or the reason it failed."""
    if os.geteuid() != 0:
        return "not root, cannot install " + " ".join(DEBIAN_PACKAGES)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    steps = [(["apt-get", "update"], 300),
             (["apt-get", "install", "-y", "--no-install-recommends", *DEBIAN_PACKAGES], 600)]
    for cmd, timeout in steps:
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except (subprocess.TimeoutExpired, OSError) as exc:
            return f"{' '.join(cmd[:2])} failed: {exc}"
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            return f"{' '.join(cmd[:2])} failed: {tail}"
    return ""



def gst_available() -> str:
    """'ok' if the RTSP server can run, after installing the Debian packages if needed; else the reason."""
    reason = _probe()
    if reason != "ok":
        failed = _install()
        reason = _probe() if not failed else failed
    return reason


class Server:
    """One test server subprocess on 127.0.0.1:port; restartable on the same port."""

    def __init__(self, python: str, mode: str, port: int, mount: str = "/cam", clip: Path | None = None) -> None:
        self.python, self.mode, self.port, self.mount, self.clip = python, mode, port, mount, clip
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}{self.mount}"

    def start(self, timeout: float = 30.0) -> "Server":
        cmd = self.command()
        deadline = time.monotonic() + timeout
        while True:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = _readline(self.proc, deadline)
            if line.strip() == "ready":
                return self
            err = self.stop()
            if time.monotonic() > deadline:
                raise RuntimeError(f"test server {self.mode} on port {self.port} did not start: {line!r} {err}")
            time.sleep(0.2)  # port still held by the previous process: try again

    def command(self) -> list[str]:
        cmd = [self.python, str(SERVER), self.mode, "--port", str(self.port), "--mount", self.mount]
        if self.clip is not None:
            cmd += ["--clip", str(self.clip)]
        return cmd

    def kill(self) -> None:
        """SIGKILL, like a camera losing power."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> str:
        """Stop the process (always succeeds); returns what it wrote on stderr."""
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            except ProcessLookupError:
                pass
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            err = ""
        return (err or "").strip()[-500:]


class HttpServer(Server):
    """A tests/live/http_server.py subprocess (``mjpeg`` or ``files`` mode) on 127.0.0.1:port;
    ``args`` are passed on (``--clip``, ``--dir``, ``--garbage-after``, ...)."""

    def __init__(self, mode: str, port: int, path: str, args: list[str]) -> None:
        super().__init__(sys.executable, mode, port, path)
        self.args = list(args)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.mount}"

    def command(self) -> list[str]:
        return [self.python, str(HTTP_SERVER), self.mode, "--port", str(self.port), *self.args]


def quiet_stream(body: bytes, client_closed: threading.Event, done: threading.Event,
                 requested: threading.Event | None = None) -> str:
    """An HTTP stream on 127.0.0.1 that sends ``body`` and then nothing, keeping the
    connection open; ``requested`` is set when the client's request arrives,
    ``client_closed`` when the client closes the connection."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        if requested is not None:
            requested.set()
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: video/mp2t\r\n\r\n" + body)
        conn.settimeout(0.1)
        while not done.is_set():
            try:
                if conn.recv(4096) == b"":
                    client_closed.set()
                    break
            except TimeoutError:
                continue
            except OSError:
                client_closed.set()
                break
        conn.close()
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/cam.ts"


def _readline(proc: subprocess.Popen[str], deadline: float) -> str:
    """First stdout line, or '' if the process ends or the deadline passes."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if sel.select(timeout=0.2):
                return proc.stdout.readline()
            if proc.poll() is not None:
                return ""
    finally:
        sel.close()
    return ""


def _environ(env: dict[str, str] | None) -> dict[str, str] | None:
    return None if env is None else {**os.environ, **env}


def vapipe(*args: str, timeout: float, cwd: Path | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI (``env``: variables added to the environment); kills it (and fails the
    test) if it runs longer than ``timeout``."""
    cmd = [sys.executable, "-m", "pipeline", *args]
    try:
        return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT,
                              env=_environ(env))
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"vapipe did not finish within {timeout} s: {' '.join(args)}\n{exc.stderr}") from None


def vapipe_popen(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "pipeline", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd or ROOT,
                            env=_environ(env))


def read_jsonl(path: Path) -> tuple[list[dict], list[dict]]:
    """(frame records, event records) of a JSON Lines output; a partial last line is ignored."""
    frames, events = [], []
    if not path.exists():
        return frames, events
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        (events if "event" in rec else frames).append(rec)
    return frames, events


def json_summary(proc: subprocess.CompletedProcess[str]) -> dict:
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"no JSON summary (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from None


def source_stats(summary: dict, name: str) -> dict:
    return next(s for s in summary["sources"] if s["source"] == name)


def event_states(events: list[dict]) -> list[str]:
    return [e["event"] for e in events]


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"vapipe ended (exit {proc.returncode}) while waiting for {what}: "
                                 f"{proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def finish(proc: subprocess.Popen[str], timeout: float = 30.0) -> tuple[int, str, str]:
    """SIGINT (finish frames in flight, close outputs), then wait; SIGKILL if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"vapipe did not stop within {timeout} s after SIGINT:\n{err}") from None
    return proc.returncode, out, err


# fake V4L2 camera ----------------------------------------------------------------------------

FAKE_V4L2_SOURCE = HERE / "fake_v4l2.c"
FACE_CLIP = "head-pose-face-detection-female-and-male.gif"  # 480x270, 56 frames, two faces in each


def build_fake_v4l2(gcc: str, out_dir: Path) -> Path:
    """tests/live/fake_v4l2.c compiled to ``out_dir/fake_v4l2.so``."""
    lib = out_dir / "fake_v4l2.so"
    cmd = [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(lib), str(FAKE_V4L2_SOURCE), "-ldl"]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"building the fake v4l2 camera failed: {' '.join(cmd)}\n{r.stderr}")
    return lib


def write_yuyv(clip: Path, path: Path) -> tuple[int, int, int]:
    """Every frame of ``clip`` as raw YUYV 4:2:2 (what a webcam sends) into ``path``;
    returns (width, height, frames)."""
    import av

    n = width = height = 0
    with av.open(str(clip)) as src, open(path, "wb") as out:
        for frame in src.decode(video=0):
            pixels = frame.reformat(format="yuyv422").to_ndarray()  # (height, width, 2), no row padding
            height, width = pixels.shape[:2]
            out.write(pixels.tobytes())
            n += 1
    return width, height, n


class FakeCamera:
    """One fake V4L2 camera: the environment that makes ``device`` a camera in a vapipe
    process (LD_PRELOAD of the shim), and unplug/plug through its marker file."""

    def __init__(self, library: Path, frames: Path, size: tuple[int, int], device: str, fps: float,
                 marker: Path) -> None:
        self.library, self.frames, self.size = library, frames, size
        self.device, self.fps, self.marker = device, fps, marker
        self.plug()

    @property
    def name(self) -> str:
        """The source name vapipe gives the device (its file name)."""
        return Path(self.device).name

    def env(self) -> dict[str, str]:
        return {"LD_PRELOAD": str(self.library), "FAKE_V4L2_DEVICE": self.device,
                "FAKE_V4L2_FRAMES": str(self.frames), "FAKE_V4L2_SIZE": f"{self.size[0]}x{self.size[1]}",
                "FAKE_V4L2_FPS": str(self.fps), "FAKE_V4L2_PLUGGED": str(self.marker)}

    def unplug(self) -> None:
        """The device node disappears; descriptors opened on it fail with ENODEV."""
        self.marker.unlink(missing_ok=True)

    def plug(self) -> None:
        """A camera appears at the path again (a new device: old descriptors stay dead)."""
        self.marker.touch()
