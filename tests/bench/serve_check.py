"""Outside check and measurements of ``vapipe serve`` (slow; not part of ``make test``).

Drives a real server with DL Streamer Pipeline Server's own command-line client
(``client/`` of its repository at tag 2022.2.0, unmodified, in a virtual
environment of its own with ``requests``, ``paho-mqtt<2`` and ``kafka-python``,
which its results watcher imports), then measures:

* start-to-first-frame latency over REST (POST to the first record in the
  destination file; the first instance also compiles the model),
* live-view latency (a frame leaving the decoder to its JPEG arriving at an MJPEG client),
* 8 instances at once (8 RTSP cameras at their 10 frames/s, and 8 file sources as fast
  as they go) with each one's FPS.

Usage (a checkout holding ``client/`` and ``server/pipeline.py`` of that tag)::

    python -m tests.bench.serve_check --client-dir DIR --client-python DIR/venv/bin/python

Needs the shared clips, mosquitto and the GStreamer RTSP test server (tests/live).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.conftest import SHARED
from tests.live.helpers import PERSON_CLIP as CLIP, SYSTEM_PYTHON, Server, free_port

VIDEOS = SHARED / "data" / "videos"
FILE_CLIP = VIDEOS / "car-detection.mp4"


def _client(args: argparse.Namespace, base: str, *cmd: str, timeout: float = 600) -> str:
    env = dict(os.environ, PYTHONPATH=str(args.client_dir), MQTT_CLUSTER_BROKER="")
    r = subprocess.run([args.client_python, str(Path(args.client_dir) / "client"), *cmd, "--server-address", base],
                       capture_output=True, text=True, timeout=timeout, env=env, cwd=args.client_dir)
    out = r.stdout + r.stderr
    print(f"$ client {' '.join(cmd)}  (exit {r.returncode})")
    lines = out.strip().splitlines()
    for line in lines[:6] + (["..."] + lines[-4:] if len(lines) > 10 else lines[6:]):
        print(f"    {line}")
    if r.returncode != 0:
        raise SystemExit(f"the client failed: {' '.join(cmd)}")
    return out


def _wait_running(base: str, iid: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = httpx.get(f"{base}/pipelines/status/{iid}").json()
        if s["state"] == "RUNNING" and s["sources"] and s["sources"][0]["frames"] > 0:
            return s
        if s["state"] in ("ERROR", "COMPLETED", "ABORTED") or time.monotonic() > deadline:
            raise SystemExit(f"instance {iid}: {s['state']} {s['message']}")
        time.sleep(0.05)


def client_checks(args: argparse.Namespace, base: str, rtsp: str, mqtt_port: int, tmp: Path) -> None:
    out = _client(args, base, "list-pipelines")
    assert " - persons/1" in out
    out = _client(args, base, "run", "persons/1", f"file://{VIDEOS / CLIP}")
    assert "- person (" in out and "avg_fps:" in out, "run: no detections or no avg_fps"
    out = _client(args, base, "start", "persons/1", rtsp)
    iid = out.strip().splitlines()[-1].split()[-1]
    _wait_running(base, iid)
    time.sleep(3)
    out = _client(args, base, "status", "persons/1", iid)
    assert out.startswith("RUNNING ("), out
    out = _client(args, base, "stop", "persons/1", iid)
    assert "Pipeline stopped" in out and "avg_fps:" in out
    assert _client(args, base, "status", "persons/1", iid).startswith("ABORTED")
    out = _client(args, base, "run", "persons/1", f"file://{FILE_CLIP}", "--number-of-streams", "4")
    assert out.count("state=COMPLETED") >= 4 and "4 pipelines running." in out
    out = _client(args, base, "run", "persons/1", f"file://{VIDEOS / CLIP}", "--destination", "type", "mqtt",
                  "--destination", "host", f"127.0.0.1:{mqtt_port}", "--destination", "topic", "vapipe-check")
    assert "- person (" in out and "avg_fps:" in out, "MQTT: no detections printed"


def first_frame_latency(base: str, tmp: Path, uri: str, rounds: int) -> list[float]:
    out = []
    for k in range(rounds):
        dest = tmp / f"first-{k}.jsonl"
        t0 = time.monotonic()
        iid = httpx.post(f"{base}/pipelines/persons/1", json={
            "source": {"uri": uri, "type": "uri"},
            "destination": {"metadata": {"type": "file", "path": str(dest), "format": "json-lines"}}}).json()
        while not (dest.exists() and dest.stat().st_size > 0):
            if time.monotonic() - t0 > 60:
                raise SystemExit("no first frame within 60 s")
            time.sleep(0.002)
        out.append(time.monotonic() - t0)
        httpx.delete(f"{base}/pipelines/{iid}", timeout=60)
    return out


def live_latency(base: str, rtsp: str, seconds: float = 6.0) -> list[float]:
    iid = httpx.post(f"{base}/pipelines/persons/1", json={"source": {"uri": rtsp, "type": "uri"}}).json()
    status = _wait_running(base, iid)
    sid = status["sources"][0]["id"]
    latencies: list[float] = []
    with httpx.stream("GET", f"{base}/live/{iid}/{sid}", timeout=30) as r:
        buf, end = b"", time.monotonic() + seconds
        chunks = r.iter_bytes()
        while time.monotonic() < end:
            buf += next(chunks)
            while b"\r\n\r\n" in buf:
                head, _, rest = buf.partition(b"\r\n\r\n")
                headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n") if ": " in line)
                length = int(headers["Content-Length"])
                if len(rest) < length + 2:
                    break
                latencies.append((time.monotonic_ns() - int(headers["X-Captured-Monotonic-Ns"])) / 1e6)
                buf = rest[length + 2:]
        chunks.close()
    httpx.delete(f"{base}/pipelines/{iid}", timeout=60)
    return latencies


def eight_at_once(base: str, uri: str, seconds: float, params: dict | None = None) -> list[dict]:
    ids = [httpx.post(f"{base}/pipelines/persons/1", json={"source": {"uri": uri, "type": "uri"},
                                                            "parameters": params or {}}).json() for _ in range(8)]
    for iid in ids:
        _wait_running(base, iid)
    time.sleep(seconds)
    statuses = [httpx.get(f"{base}/pipelines/status/{iid}").json() for iid in ids]
    for iid in ids:
        httpx.delete(f"{base}/pipelines/{iid}", timeout=60)
    return statuses


def one_instance_eight_sources(base: str, uri: str, seconds: float, params: dict) -> float:
    iid = httpx.post(f"{base}/pipelines/persons/1", json={"source": {"uri": uri, "type": "uri"},
                                                          "parameters": params}).json()
    _wait_running(base, iid)
    for _ in range(7):
        r = httpx.post(f"{base}/pipelines/{iid}/sources", json={"uri": uri}, timeout=60)
        r.raise_for_status()
    time.sleep(seconds)
    fps = httpx.get(f"{base}/pipelines/status/{iid}").json()["avg_fps"]
    httpx.delete(f"{base}/pipelines/{iid}", timeout=60)
    return fps


def cli_eight_sources(uri_path: Path, frames: int, tmp: Path) -> float:
    cmd = [sys.executable, "-m", "pipeline", "run", "persons", *sum((["--source", str(uri_path)] for _ in range(8)), []),
           "--set", "decode.loop=true", "--max-frames", str(frames), "--json", "--no-progress",
           "--output", str(tmp / "cli")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return float(json.loads(r.stdout)["total_fps"])


def compare(base: str, tmp: Path, rounds: int = 2) -> None:
    """The same 8 looping file sources: one CLI run, 8 service instances, 1 instance with 8 sources."""
    results: dict[str, list[float]] = {"cli, one run of 8 sources": [], "serve, 8 instances": [],
                                       "serve, 1 instance + 7 added sources": []}
    uri = f"file://{FILE_CLIP}"
    for _ in range(rounds):
        results["cli, one run of 8 sources"].append(cli_eight_sources(FILE_CLIP, 100, tmp))
        results["serve, 8 instances"].append(sum(s["avg_fps"] for s in eight_at_once(base, uri, 10.0,
                                                                                     {"decode.loop": True})))
        results["serve, 1 instance + 7 added sources"].append(one_instance_eight_sources(base, uri, 10.0,
                                                                                          {"decode.loop": True}))
    ref = statistics.median(results["cli, one run of 8 sources"])
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:<38} total {', '.join(f'{v:.1f}' for v in values)} fps (median {med:.1f}, "
              f"{med / ref:.2f}x the CLI)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--client-dir", required=True, help="holds client/ and server/pipeline.py (tag 2022.2.0)")
    p.add_argument("--client-python", required=True, help="python of a venv with requests, paho-mqtt<2, kafka-python")
    p.add_argument("--skip-client", action="store_true", help="only the measurements")
    p.add_argument("--compare-only", action="store_true", help="only the side-by-side CLI/serve comparison")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vapipe-serve-check-"))
    port, mqtt_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {mqtt_port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    procs = [subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    camera = Server(SYSTEM_PYTHON, "serve", free_port(), "/cam", VIDEOS / CLIP).start()
    server = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--port", str(port), "--allow-dir", str(tmp),
                               "--allow-dir", str(VIDEOS), "--allow-dir", "/tmp", "--output", str(tmp / "out")],
                              stderr=subprocess.PIPE, text=True)
    procs.append(server)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.2)
        cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "?")
        print(f"CPU: {model}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start")
        if args.compare_only:
            compare(base, tmp)
            return 0
        if not args.skip_client:
            client_checks(args, base, camera.url, mqtt_port, tmp)
            print("DL Streamer Pipeline Server client: all checks passed")
        file_uri = f"file://{VIDEOS / CLIP}"
        cold_warm = first_frame_latency(base, tmp, file_uri, 5)
        rtsp_first = first_frame_latency(base, tmp, camera.url, 3)
        print(f"start-to-first-frame over REST, file: {', '.join(f'{x * 1000:.0f}' for x in cold_warm)} ms "
              f"(median {statistics.median(cold_warm) * 1000:.0f} ms)")
        print(f"start-to-first-frame over REST, RTSP camera: {', '.join(f'{x * 1000:.0f}' for x in rtsp_first)} ms")
        lat = live_latency(base, camera.url)
        print(f"live view (decoder output to MJPEG client), persons on RTSP: median {statistics.median(lat):.0f} ms, "
              f"p95 {sorted(lat)[int(0.95 * (len(lat) - 1))]:.0f} ms over {len(lat)} frames")
        for label, uri, params in (("8 RTSP cameras (10 fps each)", camera.url, None),
                                   ("8 looping file sources", f"file://{FILE_CLIP}", {"decode.loop": True})):
            statuses = eight_at_once(base, uri, 10.0, params)
            fps = [s["avg_fps"] for s in statuses]
            drops = sum(src["dropped"] for s in statuses for src in s["sources"])
            print(f"{label}: " + ", ".join(f"{f:.1f}" for f in fps) + f" fps; total {sum(fps):.1f}, dropped {drops}; "
                  f"load average {os.getloadavg()[0]:.1f}")
        compare(base, tmp)
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        camera.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
