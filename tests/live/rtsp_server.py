"""Test servers for live-source tests; runs with Debian's ``/usr/bin/python3``.

Modes (each prints ``ready`` on stdout once it listens on 127.0.0.1:PORT):

``serve``     an RTSP server (GStreamer's gst-rtsp-server) that plays an H.264
              MP4 clip in real time at ``rtsp://127.0.0.1:PORT/MOUNT``, looping
              forever.  The clip's access units are read once at start-up
              (``filesrc ! qtdemux ! h264parse ! appsink``, SPS/PPS repeated at
              every IDR) and pushed by an ``appsrc`` with their own timestamps
              shifted by one clip duration per loop, so every client starts at
              an IDR frame and the sinks pace the stream to the clip's rate.
``accept``    a plain TCP server that accepts connections and never answers.
``describe``  a plain TCP server that answers RTSP OPTIONS, DESCRIBE, SETUP and
              PLAY (H.264 SDP, interleaved TCP transport) and then sends no media.

Usage::

    /usr/bin/python3 tests/live/rtsp_server.py serve --port 8554 --mount /cam --clip clip.mp4
    /usr/bin/python3 tests/live/rtsp_server.py accept --port 8555
    /usr/bin/python3 tests/live/rtsp_server.py describe --port 8556

The script needs nothing beyond the standard library for ``accept`` and
``describe``; ``serve`` needs python3-gi and gir1.2-gst-rtsp-server-1.0 plus
the GStreamer base, good and bad plugins.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading


def _ready() -> None:
    print("ready", flush=True)


# -- serve: a real RTSP server ------------------------------------------------------------------

def serve(port: int, mount: str, clip: str) -> None:
    import gi

    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer

    Gst.init(None)
    units, caps, clip_ns = _read_clip(Gst, clip)
    if not units:
        raise SystemExit(f"no H.264 access units in {clip}")
    shift = max(0, -min(min(u[1], u[2]) for u in units))  # keep every timestamp >= 0

    class Factory(GstRtspServer.RTSPMediaFactory):
        def do_create_element(self, url):  # noqa: N802 - GStreamer's name
            return Gst.parse_launch(
                "( appsrc name=src is-live=true format=time do-timestamp=false "
                "! h264parse ! rtph264pay name=pay0 pt=96 config-interval=1 )")

    def on_media_configure(_factory, media) -> None:
        src = media.get_element().get_child_by_name("src")
        src.set_property("caps", caps)
        state = {"i": 0}

        def need_data(appsrc, _length) -> None:
            i = state["i"]
            state["i"] = i + 1
            data, pts, dts, dur, delta = units[i % len(units)]
            offset = (i // len(units)) * clip_ns + shift
            buf = Gst.Buffer.new_wrapped(data)
            buf.pts = pts + offset
            buf.dts = dts + offset
            buf.duration = dur
            if delta:
                buf.set_flags(Gst.BufferFlags.DELTA_UNIT)
            appsrc.emit("push-buffer", buf)

        src.connect("need-data", need_data)

    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(port))
    factory = Factory()
    factory.set_shared(False)  # every client gets its own pipeline, starting at the first IDR frame
    factory.connect("media-configure", on_media_configure)
    server.get_mount_points().add_factory(mount, factory)
    if server.attach(None) == 0:
        raise SystemExit(f"cannot listen on 127.0.0.1:{port}")
    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    _ready()
    loop.run()


def _read_clip(Gst, clip: str):  # noqa: N803 - the GStreamer module
    """Access units of the clip: [(bytes, pts_ns, dts_ns, duration_ns, is_delta)], caps, clip length in ns."""
    pipe = Gst.parse_launch(
        f'filesrc location="{clip}" ! qtdemux ! h264parse config-interval=-1 '
        "! video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=sink sync=false")
    sink = pipe.get_by_name("sink")
    pipe.set_state(Gst.State.PLAYING)
    units = []
    caps = None
    while True:
        sample = sink.emit("pull-sample")
        if sample is None:
            break
        caps = caps or sample.get_caps()
        buf = sample.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        if not ok:
            continue
        data = bytes(info.data)
        buf.unmap(info)
        pts = buf.pts if buf.pts != Gst.CLOCK_TIME_NONE else None
        dts = buf.dts if buf.dts != Gst.CLOCK_TIME_NONE else pts
        dur = buf.duration if buf.duration != Gst.CLOCK_TIME_NONE else None
        units.append([data, pts, dts, dur, bool(buf.get_flags() & Gst.BufferFlags.DELTA_UNIT)])
    pipe.set_state(Gst.State.NULL)
    if not units:
        return [], caps, 0
    step = next((u[3] for u in units if u[3]), 100_000_000)
    for k, u in enumerate(units):  # fill gaps (rare): evenly spaced
        if u[1] is None:
            u[1] = k * step
        if u[2] is None:
            u[2] = u[1]
        if u[3] is None:
            u[3] = step
    clip_ns = max(u[1] + u[3] for u in units) - min(u[1] for u in units)
    return [tuple(u) for u in units], caps, clip_ns


# -- stall servers ------------------------------------------------------------------------------

def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def accept_and_stall(port: int) -> None:
    """Accept every connection, read whatever arrives, never answer."""
    sock = _listen(port)
    _ready()
    held = []
    while True:
        conn, _ = sock.accept()
        held.append(conn)  # kept open (and silent) until the process ends
        threading.Thread(target=_drain, args=(conn,), daemon=True).start()


def _drain(conn: socket.socket) -> None:
    try:
        while conn.recv(4096):
            pass
    except OSError:
        pass


_SDP = ("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=stall\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
        "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n"
        "a=fmtp:96 packetization-mode=1;profile-level-id=4d001f\r\na=control:stream=0\r\n")


def describe_and_stall(port: int) -> None:
    """Answer the RTSP handshake like a camera, then send no media."""
    sock = _listen(port)
    _ready()
    while True:
        conn, _ = sock.accept()
        threading.Thread(target=_rtsp_session, args=(conn,), daemon=True).start()


def _rtsp_session(conn: socket.socket) -> None:
    buf = b""
    try:
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                return
            buf += chunk
            while b"\r\n\r\n" in buf:
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, url = (lines[0].split(" ") + ["", ""])[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                length = int(headers.get("content-length", "0") or 0)
                while len(buf) < length:
                    more = conn.recv(4096)
                    if not more:
                        return
                    buf += more
                buf = buf[length:]
                conn.sendall(_reply(method, url, headers))
    except OSError:
        return


def _reply(method: str, url: str, headers: dict[str, str]) -> bytes:
    cseq = headers.get("cseq", "0")
    extra, body = "", ""
    if method == "OPTIONS":
        extra = "Public: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n"
    elif method == "DESCRIBE":
        body = _SDP
        extra = f"Content-Base: {url.rstrip('/')}/\r\nContent-Type: application/sdp\r\n"
    elif method == "SETUP":
        extra = "Transport: RTP/AVP/TCP;unicast;interleaved=0-1\r\nSession: 12345678;timeout=60\r\n"
    elif method in ("PLAY", "TEARDOWN"):
        extra = "Session: 12345678\r\n"
    return (f"RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\n{extra}Content-Length: {len(body)}\r\n\r\n{body}").encode()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["serve", "accept", "describe"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mount", default="/cam")
    p.add_argument("--clip", default=None, help="H.264 MP4 clip (serve)")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.mode == "serve":
        if not a.clip:
            p.error("serve needs --clip")
        serve(a.port, a.mount, a.clip)
    elif a.mode == "accept":
        accept_and_stall(a.port)
    else:
        describe_and_stall(a.port)


if __name__ == "__main__":
    main()
