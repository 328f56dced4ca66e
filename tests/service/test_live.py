"""MJPEG live view on a real server: frames only while watched, a departed viewer noticed in 2 s."""

from __future__ import annotations

import statistics
import time

import cv2
import httpx
import numpy as np

from .test_metrics import _samples

TICKER = "testsrc://ticker?width=640&height=360"


def _metric(base: str, name: str) -> float:
    return sum(_samples(httpx.get(f"{base}/metrics").text, name).values())


def _parts(chunks, count: int) -> list[tuple[dict[str, str], bytes, int]]:
    """The first ``count`` parts of a multipart stream: (headers, JPEG, monotonic ns at receipt).
    ``chunks`` is an iterator over the body; it is left open (leaving a for loop over
    ``iter_bytes`` would close the connection)."""
    buf, out = b"", []
    for chunk in iter(lambda: next(chunks, b""), b""):
        buf += chunk
        while True:
            head_end = buf.find(b"\r\n\r\n")
            if head_end < 0:
                break
            lines = buf[:head_end].decode().split("\r\n")
            headers = dict(line.split(": ", 1) for line in lines if ": " in line)
            length = int(headers["Content-Length"])
            if len(buf) < head_end + 4 + length + 2:
                break
            out.append((headers, buf[head_end + 4:head_end + 4 + length], time.monotonic_ns()))
            buf = buf[head_end + 4 + length + 2:]
            if len(out) == count:
                return out
    return out


def test_mjpeg_only_while_watched_and_departure_noticed(live_server) -> None:
    base = live_server.url
    iid = httpx.post(f"{base}/pipelines/scene/1", json={"source": {"uri": TICKER, "type": "uri"}}).json()
    deadline = time.monotonic() + 30
    while True:
        status = httpx.get(f"{base}/pipelines/status/{iid}").json()
        if status["state"] == "RUNNING" and status["sources"] and status["sources"][0]["frames"] > 10:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    sid = status["sources"][0]["id"]
    time.sleep(1.0)
    assert _metric(base, "vapipe_live_frames_total") == 0  # nobody watches: no JPEG made

    with httpx.stream("GET", f"{base}/live/{iid}/{sid}", timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("multipart/x-mixed-replace")
        chunks = r.iter_bytes()  # kept referenced: a collected iterator closes the connection
        parts = _parts(chunks, 8)
        assert len(parts) == 8, parts
        assert _metric(base, "vapipe_live_viewers") == 1
        chunks.close()
    left = time.monotonic()
    images = [cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR) for _, jpeg, _ in parts]
    assert all(img is not None and img.shape == (360, 640, 3) for img in images)
    assert any(np.abs(a.astype(int) - b.astype(int)).mean() > 1 for a, b in zip(images, images[1:]))
    seqs = [int(h["X-Frame-Seq"]) for h, _, _ in parts]
    gaps = [b - a for a, b in zip(seqs, seqs[1:])]
    assert min(gaps) >= 4, gaps  # capped at 5 of the scene's 25 frames a second
    latency_ms = [(t - int(h["X-Captured-Monotonic-Ns"])) / 1e6 for h, _, t in parts]
    print(f"live view latency (decoder output to client): median {statistics.median(latency_ms):.1f} ms, "
          f"max {max(latency_ms):.1f} ms")

    while _metric(base, "vapipe_live_viewers") != 0:
        assert time.monotonic() - left < 2.0, "viewer departure not noticed within 2 s"
        time.sleep(0.05)
    noticed = time.monotonic() - left
    made = _metric(base, "vapipe_live_frames_total")
    time.sleep(1.0)
    assert _metric(base, "vapipe_live_frames_total") == made  # production stopped with the viewer
    print(f"viewer departure noticed after {noticed:.2f} s")
    assert httpx.get(f"{base}/live/{iid}/nope").status_code == 404
    httpx.delete(f"{base}/pipelines/{iid}", timeout=30)
    ended = httpx.get(f"{base}/live/{iid}/{sid}", timeout=10)  # an empty stream would look like a hang
    assert ended.status_code == 409 and "has ended (ABORTED)" in ended.json()["detail"], ended.text


def test_shutdown_ends_open_live_views_at_once(tmp_path) -> None:
    import signal
    import threading

    from service.cli import build_server, serve_app

    from .conftest import serve_args
    from tests.live.helpers import free_port

    port = free_port()
    app, manager = serve_app(serve_args(tmp_path, port=port))
    server = build_server(app, "127.0.0.1", port)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign] - not the main thread
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        iid = httpx.post(f"{base}/pipelines/scene/1", json={"source": {"uri": TICKER, "type": "uri"}}).json()
        while not (status := httpx.get(f"{base}/pipelines/status/{iid}").json())["sources"]:
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
        with httpx.stream("GET", f"{base}/live/{iid}/{status['sources'][0]['id']}", timeout=10) as r:
            chunks = r.iter_bytes()
            assert len(_parts(chunks, 2)) == 2
            asked = time.monotonic()
            server.handle_exit(signal.SIGTERM, None)
            thread.join(timeout=10)
            stopped_s = time.monotonic() - asked
            assert not thread.is_alive() and stopped_s < 3.0, f"server took {stopped_s:.1f} s with a viewer"
            rest = b"".join(iter(lambda: next(chunks, b""), b""))  # the stream ended, not cut
            assert rest.count(b"--vapipeframe") <= 5
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        manager.close()


def test_the_view_keeps_its_rate_cap_for_cameras_with_jitter(monkeypatch) -> None:
    """A 10 fps camera under a 5 fps cap gives 5 pictures a second, not one frame in three
    (frames a little before their due time are taken); a 25 fps one gives 5, a 3 fps one all."""
    import random

    from pipeline.frame import Frame
    from service import live as live_module

    image = np.zeros((8, 8, 3), np.uint8)
    for camera_fps, expected in ((10.0, 5), (25.0, 5), (3.0, 3)):
        view = live_module.LiveView(fps=5.0)
        view._watchers["cam"] = [object()]  # watched
        taken = []
        rng = random.Random(0)
        for i in range(int(camera_fps * 20)):  # 20 s of frames, each up to 5 ms early or late
            t = i / camera_fps + rng.uniform(-0.005, 0.005)
            monkeypatch.setattr(live_module.time, "monotonic", lambda t=t: 1000.0 + t)
            view._pending.pop("cam", None)
            view.tap("cam", Frame.from_image(image, "cam", i))
            if "cam" in view._pending:
                taken.append(t)
        rate = len(taken) / 20.0
        assert abs(rate - expected) <= 0.15, (camera_fps, rate)
