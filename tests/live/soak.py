"""Soak run: 4 cameras for N minutes, one RTSP camera dropped every minute.

Cameras: 2 RTSP streams from the test server (tests/live/rtsp_server.py, each in
its own process, looping the 10 fps clip in real time) and 2 looping files paced
in real time (``decode.realtime=true``).  At every minute mark one RTSP server
(alternating) is killed and started again ``--down-s`` seconds later.

Prints, once a minute: RSS and thread count of the vapipe process and frames
written so far per camera; at the end: the RSS slope (MB/min, least squares over
the 5 s RSS samples from minute 2 to the end; target <= 1 MB/min), threads at
start and end, frames processed and dropped, events and reconnect times per
camera.  Exit code 1 if the slope exceeds the target or a camera failed.

    python -m tests.live.soak [--minutes 10] [--pipeline persons]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.conftest import SHARED  # also points VAPIPE_MODELS_DIR at the shared models
from tests.live.helpers import ROOT, SYSTEM_PYTHON, Server, free_port, gst_available

TARGET_MB_PER_MIN = 1.0
VIDEOS = SHARED / "data" / "videos"


def _proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def _count_frames(path: Path, state: dict) -> int:
    """Frame records in a growing JSON Lines file (reads only what was added)."""
    if path.exists():
        with open(path, "rb") as f:
            f.seek(state.get("pos", 0))
            data = f.read()
        state["pos"] = state.get("pos", 0) + len(data)
        lines = (state.get("partial", b"") + data).split(b"\n")
        state["partial"] = lines.pop()
        state["n"] = state.get("n", 0) + sum(1 for ln in lines if ln.startswith(b'{"source"'))
    return state.get("n", 0)


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--pipeline", default="persons")
    p.add_argument("--down-s", type=float, default=2.0, help="how long a dropped RTSP server stays down")
    p.add_argument("--drop-every-s", type=float, default=60.0, help="seconds between RTSP camera drops")
    p.add_argument("--output", default=None, help="output directory (default: a temporary one, removed)")
    a = p.parse_args(argv)

    reason = gst_available()
    if reason != "ok":
        print(f"soak: GStreamer RTSP server unavailable for {SYSTEM_PYTHON}: {reason}", file=sys.stderr)
        return 2
    rtsp_clip = VIDEOS / "one-by-one-person-detection.mp4"
    files = [VIDEOS / "one-by-one-person-detection.mp4", VIDEOS / "car-detection.mp4"]
    for f in [rtsp_clip, *files]:
        if not f.is_file():
            print(f"soak: clip not found: {f}", file=sys.stderr)
            return 2
    out = Path(a.output) if a.output else Path(tempfile.mkdtemp(prefix="vapipe-soak-"))
    servers = [Server(SYSTEM_PYTHON, "serve", free_port(), f"/cam{i}", rtsp_clip) for i in (1, 2)]
    proc: subprocess.Popen[str] | None = None
    stderr_lines: list[str] = []
    try:
        for s in servers:
            s.start()
        sources = [s.url for s in servers] + [str(f) for f in files]
        cmd = [sys.executable, "-m", "pipeline", "run", a.pipeline, "--output", str(out), "--json", "--no-progress",
               "--set", "decode.realtime=true", "--set", "decode.loop=true",
               "--set", "decode.reconnect={initial_s: 0.5, max_s: 5.0}"]
        for src in sources:
            cmd += ["--source", src]
        env = dict(os.environ, PYTHONFAULTHANDLER="1")  # a crash prints every thread's stack
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        # keep reading stderr (reconnect warnings) so that the pipe never fills up
        reader = threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True)  # type: ignore[union-attr,arg-type]
        reader.start()
        names = ["cam1", "cam2", files[0].stem, files[1].stem]
        counters: dict[str, dict] = {n: {} for n in names}
        t0 = time.monotonic()
        samples: list[tuple[float, float]] = []  # (minutes, RSS MB)
        threads_start: int | None = None
        threads_end: int | None = None
        next_minute, next_sample = 1, 0.0
        next_drop, drops = a.drop_every_s, 0
        print(f"soak: {a.pipeline} on {', '.join(sources)} for {a.minutes:g} min; output {out}", flush=True)
        print(f"{'min':>4} {'RSS MB':>8} {'threads':>7}  frames so far ({', '.join(names)})", flush=True)
        end = t0 + a.minutes * 60
        restart_at: tuple[float, Server] | None = None
        while time.monotonic() < end:
            if proc.poll() is not None:
                log = out / "vapipe-stderr.txt"
                log.write_text("".join(stderr_lines), encoding="utf-8")
                raise SystemExit(f"soak: vapipe ended early (exit {proc.returncode}); its stderr: {log}\n"
                                 f"{''.join(stderr_lines)[-3000:]}")
            now = time.monotonic()
            elapsed = now - t0
            if elapsed >= next_sample:
                st = _proc_status(proc.pid)
                if "VmRSS" in st:
                    samples.append((elapsed / 60, st["VmRSS"] / 1024))
                    if threads_start is None and elapsed >= 20:  # every camera open, requests created
                        threads_start = st["Threads"]
                    threads_end = st["Threads"]
                next_sample += 5.0
            if restart_at is not None and now >= restart_at[0]:
                restart_at[1].start()
                restart_at = None
            if elapsed >= next_minute * 60:
                st = _proc_status(proc.pid)
                counts = [_count_frames(out / f"{n}.jsonl", counters[n]) for n in names]
                print(f"{next_minute:>4} {st.get('VmRSS', 0) / 1024:>8.1f} {st.get('Threads', 0):>7}  "
                      f"{' '.join(str(c) for c in counts)}", flush=True)
                next_minute += 1
            if elapsed >= next_drop and elapsed < a.minutes * 60 - 5 and restart_at is None:
                victim = servers[drops % 2]  # alternate between the two RTSP cameras
                victim.kill()
                restart_at = (time.monotonic() + a.down_s, victim)
                drops += 1
                next_drop += a.drop_every_s
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
        reader.join(timeout=5)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        for s in servers:
            s.stop()
    summary = json.loads(stdout)
    window = [(m, mb) for m, mb in samples if m >= 2.0]
    slope = _slope(window)
    first = next(((m, mb) for m, mb in samples if m * 60 >= 20), samples[-1])
    print(f"RSS slope {slope:+.3f} MB/min over minutes 2..{a.minutes:g} ({len(window)} samples every 5 s; "
          f"target <= {TARGET_MB_PER_MIN} MB/min); RSS {first[1]:.1f} MB at {first[0] * 60:.0f} s, "
          f"{samples[-1][1]:.1f} MB at the end")
    print(f"threads: {threads_start} at 20 s, {threads_end} at the end")
    print(f"{'camera':<32} {'frames':>7} {'dropped':>8} {'fps':>6}  events / reconnect_s")
    failed = False
    for s in summary["sources"]:
        print(f"{s['source']:<32} {s['frames']:>7} {s['dropped']:>8} {s['fps']:>6.1f}  {s['events'] or ''} "
              f"{s['reconnect_s'] or ''}")
        if s["error"]:
            print(f"  error: {s['error']}")
            failed = True
    if not a.output:
        shutil.rmtree(out, ignore_errors=True)
    ok = not failed and (slope != slope or slope <= TARGET_MB_PER_MIN)  # NaN: run too short to tell
    print("soak: ok" if ok else "soak: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
