"""HTTP test servers for live-source tests; plain Python (``http.server``), run with the venv's python.

Modes (each prints ``ready`` on stdout once it listens on 127.0.0.1:PORT):

``mjpeg``  an MJPEG camera: ``GET /stream.mjpg`` answers ``multipart/x-mixed-replace;
           boundary=frame`` and sends the first ``--frames`` frames of ``--clip`` as JPEG
           parts (``cv2.imencode``, encoded once at start-up), paced in real time at the
           clip's frame rate and looping forever.  Each part is::

               --frame\\r\\n
               Content-Type: image/jpeg\\r\\n
               Content-Length: N\\r\\n
               \\r\\n
               <N bytes of JPEG>\\r\\n

           ``--garbage-after K``: on the first connection, after K good parts, parts of the
           same form whose body is not a decodable JPEG (a start-of-image marker, then random
           bytes) until the client disconnects, so every packet the client reads from then on
           is undecodable (a camera whose encoder went wrong).  ``--busy N``: the N requests
           after the first are answered ``503 Service Unavailable`` (the camera restarting);
           later ones get good frames again.
           ``--content-type`` replaces the response's Content-Type (a misconfigured camera).
``files``  static files from ``--dir`` (HLS playlists and segments), with the right
           Content-Type for ``.m3u8`` and ``.ts``.

Usage::

    python tests/live/http_server.py mjpeg --port 8080 --clip clip.mp4 [--frames 200] [--garbage-after 20 --busy 2]
    python tests/live/http_server.py files --port 8081 --dir /tmp/hls
"""

from __future__ import annotations

import argparse
import functools
import random
import signal
import sys
import threading
import time
from http.server import (
    BaseHTTPRequestHandler,
    SimpleHTTPRequestHandler,
    ThreadingHTTPServer,
)

BOUNDARY = "frame"


def _ready() -> None:
    print("ready", flush=True)


def _load_jpegs(clip: str, frames: int, quality: int = 85) -> tuple[list[bytes], float]:
    """The first ``frames`` frames of the clip as JPEG bytes, and the clip's frame rate."""
    import cv2

    cap = cv2.VideoCapture(clip)
    if not cap.isOpened():
        raise SystemExit(f"cannot open {clip}")
    fps = cap.get(cv2.CAP_PROP_FPS) or 10.0
    jpegs: list[bytes] = []
    while len(jpegs) < frames:
        ok, image = cap.read()
        if not ok:
            break
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
        if ok:
            jpegs.append(buf.tobytes())
    cap.release()
    if not jpegs:
        raise SystemExit(f"no frames in {clip}")
    return jpegs, fps


def _part(body: bytes) -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(body)}\r\n\r\n").encode() \
        + body + b"\r\n"


class MjpegHandler(BaseHTTPRequestHandler):
    jpegs: list[bytes] = []
    fps: float = 10.0
    garbage_after: int | None = None
    busy: int = 0
    requests = 0
    lock = threading.Lock()
    content_type: str = f"multipart/x-mixed-replace;boundary={BOUNDARY}"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?")[0] != "/stream.mjpg":
            self.send_error(404)
            return
        cls = type(self)
        with cls.lock:
            cls.requests += 1
            n = cls.requests
        if 1 < n <= 1 + self.busy:
            self.send_error(503)
            return
        garbage_after = self.garbage_after if n == 1 else None
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        start = time.monotonic()
        i = 0
        try:
            while True:
                if garbage_after is not None and i >= garbage_after:
                    body = b"\xff\xd8" + random.Random(i).randbytes(len(self.jpegs[0]) // 2)  # seeded: same run every time
                else:
                    body = self.jpegs[i % len(self.jpegs)]
                self.wfile.write(_part(body))
                self.wfile.flush()
                i += 1
                delay = start + i / self.fps - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        except (BrokenPipeError, ConnectionResetError, OSError):
            return


class FileHandler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map,
                      ".m3u8": "application/vnd.apple.mpegurl", ".ts": "video/mp2t"}

    def log_message(self, *args) -> None:  # quiet
        pass


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["mjpeg", "files"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--clip", help="video clip (mjpeg)")
    p.add_argument("--frames", type=int, default=200, help="frames of the clip to loop (mjpeg)")
    p.add_argument("--garbage-after", type=int, default=None, help="undecodable parts after this many (mjpeg)")
    p.add_argument("--busy", type=int, default=0, help="requests after the first answered 503 (mjpeg)")
    p.add_argument("--content-type", default=None, help="Content-Type of the response (mjpeg)")
    p.add_argument("--dir", help="directory to serve (files)")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.mode == "mjpeg":
        if not a.clip:
            p.error("mjpeg needs --clip")
        jpegs, fps = _load_jpegs(a.clip, a.frames)
        attrs = {"jpegs": jpegs, "fps": fps, "garbage_after": a.garbage_after, "busy": a.busy}
        if a.content_type:
            attrs["content_type"] = a.content_type
        handler = type("Handler", (MjpegHandler,), attrs)
    else:
        if not a.dir:
            p.error("files needs --dir")
        handler = functools.partial(FileHandler, directory=a.dir)
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    try:
        server = ThreadingHTTPServer(("127.0.0.1", a.port), handler)
    except OSError as exc:
        raise SystemExit(f"cannot listen on 127.0.0.1:{a.port}: {exc}")
    _ready()
    server.serve_forever()


if __name__ == "__main__":
    main()
