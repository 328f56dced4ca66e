"""Live sources end to end: the ``vapipe`` CLI against test RTSP servers on 127.0.0.1.

Every run is a subprocess with a hard timeout; every server is killed at teardown.
The real server (tests/live/rtsp_server.py, GStreamer) loops the synthetic 10 fps
H.264 clip (tests/media.py) in real time, or the shared clip of people where the
test looks for them; the stall servers are plain Python.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.media import CLIP

from .helpers import (
    Server,
    event_states,
    finish,
    free_port,
    json_summary,
    read_jsonl,
    source_stats,
    vapipe,
    vapipe_popen,
    wait_for,
)

CLIP_FPS = float(CLIP.fps)

# decode -> metadata, and decode -> slow user stage -> metadata (no models needed)
CONFIG = """\
pipelines:
  events:
    stages:
      - {name: decode, type: decode}
      - {name: metadata, type: metadata}
  slow:
    stages:
      - {name: decode, type: decode}
      - name: slow
        type: "tests.live.slow_stage:Slow"
        params: {sleep_ms: 250}
      - {name: metadata, type: metadata}
"""


class _LineCounter(threading.Thread):
    """Samples the number of frame records in a growing JSON Lines file every ``every_s``."""

    def __init__(self, path: Path, every_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.path, self.every_s = path, every_s
        self.samples: list[tuple[float, int]] = []   # (monotonic time, frame records so far)
        self._halt = threading.Event()
        self._count = 0
        self._pos = 0
        self._partial = b""

    def _read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            data = f.read()
        self._pos += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        self._count += sum(1 for ln in lines if ln.startswith(b'{"source"'))

    def run(self) -> None:
        nxt = time.monotonic()
        while not self._halt.is_set():
            self._read()
            self.samples.append((time.monotonic(), self._count))
            nxt += self.every_s
            self._halt.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def per_second_at(self, skip_s: float) -> list[tuple[float, int]]:
        """(end time, frames added) of each interval, from ``skip_s`` after the first frame."""
        t0 = next((t for t, n in self.samples if n > 0), None)
        if t0 is None:
            return []
        s = [(t, n) for t, n in self.samples if t >= t0 + skip_s]
        return [(b[0], b[1] - a[1]) for a, b in zip(s, s[1:])]

    def per_second(self, skip_s: float) -> list[int]:
        return [n for _, n in self.per_second_at(skip_s)]

    def lag_s(self, fps: float, skip_s: float) -> list[float]:
        """Seconds behind a clock of ``fps`` frames per second at each sample from
        ``skip_s`` after the first frame, with the clock set where the camera was
        furthest ahead (so 0 is on time, and a hold-up shows as its length)."""
        t0 = next((t for t, n in self.samples if n > 0), None)
        if t0 is None:
            return []
        behind = [t - n / fps for t, n in self.samples if t >= t0 + skip_s]
        return [b - min(behind) for b in behind]


# a ----------------------------------------------------------------------------------------------

def test_rtsp_max_frames(rtsp_server: Server, tmp_path: Path) -> None:
    """`vapipe run persons --source rtsp://... --max-frames 100`: 100 frames through the stages."""
    out = tmp_path / "out"
    proc = vapipe("run", "persons", "--source", rtsp_server.url, "--max-frames", "100", "--output", str(out),
                  "--json", "--no-progress", timeout=90)
    assert proc.returncode == 0, proc.stderr
    summary = json_summary(proc)
    src = source_stats(summary, "cam")
    assert src["frames"] == 100, src
    assert src["events"].get("connecting") == 1 and src["events"].get("streaming") == 1, src
    assert summary["stages"]["person_detect"]["count"] == 100, summary["stages"]
    frames, events = read_jsonl(out / "cam.jsonl")
    assert len(frames) == 100
    assert event_states(events) == ["connecting", "streaming"]
    assert (frames[0]["width"], frames[0]["height"]) == (CLIP.width, CLIP.height)


def test_rtsp_frames_reach_the_detector(person_rtsp_server: Server, tmp_path: Path) -> None:
    """The shared clip of people over RTSP: the person detector finds them in the frames
    that arrive (the pictures come through intact, not only the frame count)."""
    out = tmp_path / "out"
    proc = vapipe("run", "persons", "--source", person_rtsp_server.url, "--max-frames", "100", "--output",
                  str(out), "--json", "--no-progress", timeout=90)
    assert proc.returncode == 0, proc.stderr
    frames, _ = read_jsonl(out / "cam.jsonl")
    assert len(frames) == 100 and (frames[0]["width"], frames[0]["height"]) == (768, 432)
    assert any(f["objects"] for f in frames), "the clip shows a person; nothing was detected"


# b ----------------------------------------------------------------------------------------------

def test_rtsp_restarts_while_file_camera_keeps_its_rate(rtsp_server: Server, clip: Path, tmp_path: Path) -> None:
    """The RTSP server is killed and restarted 10 times during one run; the stream
    reconnects every time, and a second camera (the same clip as a file, paced in real
    time and looping) keeps at least 90 % of the clip's frame rate throughout.

    The file camera's rate is measured from outside: a thread counts the frame records
    in its JSON Lines file (flushed per record) once a second. After warm-up the camera
    never falls more than 1 s behind the clip's clock (a camera held up by the other
    one's outages, 1 s each plus the reconnect, would fall further behind at every
    kill), and it delivers >= 97 % of the clip's rate over the run. The lag bound, not a
    rate over short windows, is what is asserted: the file camera catches up after a
    hold-up (its pacing follows the clip's clock), and on a machine shared with other
    work a 0.3 s hold-up from outside would fail a 90 %-over-3-s rule without saying
    anything about the runtime. (Counts sampled once a second move by +-1 frame from
    the sampling phase alone; per-second counts are only reported.)
    """
    out = tmp_path / "out"
    proc = vapipe_popen("run", "persons", "--source", rtsp_server.url, "--source", str(clip),
                        "--output", str(out), "--json", "--no-progress",
                        "--set", "decode.realtime=true", "--set", "decode.loop=true",
                        "--set", "decode.read_timeout_s=3",
                        "--set", "decode.reconnect={initial_s: 0.25, max_s: 1.0, jitter: 0.1}")
    cam_jsonl, file_jsonl = out / "cam.jsonl", out / f"{clip.stem}.jsonl"
    counter = _LineCounter(file_jsonl)
    counter.start()
    kills: list[float] = []
    try:
        streaming = lambda: event_states(read_jsonl(cam_jsonl)[1]).count("streaming")  # noqa: E731
        for i in range(10):
            wait_for(lambda: streaming() >= i + 1, 30, f"streaming #{i + 1}", proc)
            time.sleep(0.5)  # frames flow for a moment, then the camera "loses power"
            rtsp_server.kill()
            kills.append(time.monotonic())
            time.sleep(1.0)
            rtsp_server.start()
        wait_for(lambda: streaming() >= 11, 30, "streaming #11", proc)
        time.sleep(1.0)
    finally:
        counter.stop()
        code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    summary = json.loads(stdout)
    cam, filecam = source_stats(summary, "cam"), source_stats(summary, clip.stem)
    print(f"\nrtsp events: {cam['events']}\nreconnect_s: {cam['reconnect_s']}\n"
          f"rtsp frames {cam['frames']} dropped {cam['dropped']}; "
          f"file frames {filecam['frames']} fps {filecam['fps']} dropped {filecam['dropped']}")
    assert cam["events"]["streaming"] >= 11, cam
    assert 9 <= len(cam["reconnect_s"]) <= 11, cam
    assert all(0 < s < 15 for s in cam["reconnect_s"]), cam["reconnect_s"]
    assert cam["error"] is None and filecam["error"] is None
    per_s = counter.per_second(skip_s=3.0)
    lag_s = counter.lag_s(CLIP_FPS, skip_s=3.0)
    t0 = counter.samples[0][0]
    print(f"file camera frames per second: {per_s}\nlag behind the clip's clock (s): "
          f"{[round(x, 1) for x in lag_s]}\nkills at {[round(k - t0, 1) for k in kills]} s")
    assert len(per_s) >= 20, per_s
    assert max(lag_s) <= 1.0, lag_s
    assert sum(per_s) >= 0.97 * CLIP_FPS * len(per_s) - 1, per_s
    assert filecam["dropped"] == 0


# c ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["accept", "describe"])
def test_stalled_open_gives_up(make_server, mode: str, config: Path, tmp_path: Path) -> None:
    """A server that accepts (or answers the RTSP handshake) and then sends nothing: each
    open fails within open_timeout_s, the source backs off, gives up after 2 attempts."""
    server = make_server(mode)
    out = tmp_path / "out"
    t0 = time.monotonic()
    proc = vapipe("run", "events", "--config", str(config), "--source", server.url, "--output", str(out),
                  "--no-progress", "--set", "decode.open_timeout_s=2",
                  "--set", "decode.reconnect={initial_s: 0.5, max_attempts: 2}", timeout=40)
    took = time.monotonic() - t0
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"vapipe: error: gave up on {server.url} after 2 attempts: "), proc.stderr
    assert last.endswith((f"cannot open source {server.url}: no answer within the open timeout (2 s)",
                          f"cannot open source {server.url}: no video within the open timeout")), last
    _, events = read_jsonl(out / "cam.jsonl")
    assert event_states(events) == ["connecting", "reconnecting", "connecting", "gave_up"], events
    assert events[1]["delay_s"] > 0
    # an open = avformat_open_input + avformat_find_stream_info, each bounded by open_timeout_s
    for start, end in ((events[0], events[1]), (events[2], events[3])):
        assert 1.5 < end["time"] - start["time"] <= 4.5, events
    assert took < 30


def test_ctrl_c_while_a_stream_opens_stops_at_once(make_server, config: Path, tmp_path: Path) -> None:
    """Ctrl-C while FFmpeg waits for a silent server (open timeout 20 s): vapipe stops within
    a few seconds, without a reconnect attempt or a warning about the interrupted open."""
    server = make_server("accept")
    out = tmp_path / "out"
    jsonl = out / "cam.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", server.url, "--output", str(out),
                        "--no-progress", "--set", "decode.open_timeout_s=20")
    try:
        wait_for(lambda: "connecting" in event_states(read_jsonl(jsonl)[1]), 30, "connecting", proc)
        time.sleep(1.0)  # well inside the open
        interrupted = time.monotonic()
    finally:
        code, _, stderr = finish(proc)
    took = time.monotonic() - interrupted
    assert code == 0, stderr
    assert took < 5.0, f"stopped {took:.1f} s after Ctrl-C"
    assert event_states(read_jsonl(jsonl)[1]) == ["connecting"], stderr
    assert "reconnecting" not in stderr and "WARNING" not in stderr, stderr


# d ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("resume", ["sigcont", "restart"])
def test_stream_stalls_mid_run(rtsp_server: Server, config: Path, tmp_path: Path, resume: str) -> None:
    """SIGSTOP the server mid-stream: the read timeout fires (stalled), the source
    reconnects with backoff, and recovers once the server runs again (SIGCONT, or
    killed and started again on the same port)."""
    out = tmp_path / "out"
    jsonl = out / "cam.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", rtsp_server.url,
                        "--output", str(out), "--json", "--no-progress",
                        "--set", "decode.read_timeout_s=2", "--set", "decode.open_timeout_s=2",
                        "--set", "decode.reconnect={initial_s: 0.5, max_s: 2.0}")
    try:
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= 20, 30, "20 frames", proc)
        rtsp_server.pause()
        paused = time.monotonic()
        wait_for(lambda: "reconnecting" in event_states(read_jsonl(jsonl)[1]), 20, "reconnecting", proc)
        time.sleep(max(0.0, paused + 6 - time.monotonic()))
        if resume == "sigcont":
            rtsp_server.resume()
        else:
            rtsp_server.stop()
            rtsp_server.start()
        resumed = time.monotonic()
        before = len(read_jsonl(jsonl)[0])
        wait_for(lambda: event_states(read_jsonl(jsonl)[1]).count("streaming") >= 2, 30, "streaming again", proc)
        recovered = time.monotonic()
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= before + 20, 20, "20 more frames", proc)
    finally:
        code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    cam = source_stats(json.loads(stdout), "cam")
    states = event_states(read_jsonl(jsonl)[1])
    print(f"\nevents: {states}\nreconnect_s: {cam['reconnect_s']}; recovered {recovered - resumed:.2f} s "
          "after the server resumed")
    assert states[:3] == ["connecting", "streaming", "stalled"], states
    assert states[3] in ("connecting", "reconnecting"), states
    assert "reconnecting" in states and states[-1] == "streaming", states
    stalled = next(e for e in read_jsonl(jsonl)[1] if e["event"] == "stalled")
    assert stalled["reason"] == f"read error in {rtsp_server.url}: no data for 2 s (read_timeout_s)", stalled
    # down time counts from the stall being noticed (read timeout, 2 s into the 6 s pause)
    assert len(cam["reconnect_s"]) == 1 and cam["reconnect_s"][0] >= 3.5, cam
    assert cam["error"] is None


def test_ctrl_c_while_a_stream_is_quiet_stops_at_once(rtsp_server: Server, config: Path, tmp_path: Path) -> None:
    """SIGSTOP the server, then Ctrl-C inside the read timeout (20 s): vapipe stops within a
    few seconds, its summary and JSON Lines complete; the read still blocked is left to end
    alone (the process exits past it)."""
    out = tmp_path / "out"
    jsonl = out / "cam.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", rtsp_server.url,
                        "--output", str(out), "--json", "--no-progress", "--set", "decode.read_timeout_s=20")
    try:
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= 10, 30, "10 frames", proc)
        rtsp_server.pause()
        time.sleep(1.5)
        interrupted = time.monotonic()
    finally:
        code, stdout, stderr = finish(proc)
        rtsp_server.resume()
    took = time.monotonic() - interrupted
    assert code == 0, stderr
    assert took < 5.0, f"stopped {took:.1f} s after Ctrl-C"
    assert jsonl.read_bytes().endswith(b"\n")
    frames, events = read_jsonl(jsonl)
    assert event_states(events) == ["connecting", "streaming"], events
    assert source_stats(json.loads(stdout), "cam")["frames"] == len(frames) >= 10


def test_quick_recovery_counts_the_down_time(rtsp_server: Server, config: Path, tmp_path: Path) -> None:
    """The server resumes as soon as the stall is noticed, so the first reconnect works
    (no "reconnecting" event): that outage still gets its down time, and only once."""
    out = tmp_path / "out"
    jsonl = out / "cam.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", rtsp_server.url,
                        "--output", str(out), "--json", "--no-progress",
                        "--set", "decode.read_timeout_s=2", "--set", "decode.open_timeout_s=5")
    try:
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= 10, 30, "10 frames", proc)
        rtsp_server.pause()
        wait_for(lambda: "stalled" in event_states(read_jsonl(jsonl)[1]), 20, "stalled", proc)
        rtsp_server.resume()
        wait_for(lambda: event_states(read_jsonl(jsonl)[1]).count("streaming") >= 2, 30, "streaming again", proc)
    finally:
        code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    cam = source_stats(json.loads(stdout), "cam")
    states = event_states(read_jsonl(jsonl)[1])
    assert states == ["connecting", "streaming", "stalled", "connecting", "streaming"], states
    assert len(cam["reconnect_s"]) == 1 and 0 < cam["reconnect_s"][0] < 10, cam


# e ----------------------------------------------------------------------------------------------

def test_unreachable_port_backs_off_and_gives_up(config: Path, tmp_path: Path) -> None:
    """Nothing listens on the port: connection refused, reconnect with growing delays,
    every state in the JSON Lines, gave_up after max_attempts, exit != 0."""
    url = f"rtsp://127.0.0.1:{free_port()}/cam"
    out = tmp_path / "out"
    proc = vapipe("run", "events", "--config", str(config), "--source", url, "--output", str(out),
                  "--no-progress", "--set", "decode.reconnect={initial_s: 0.2, max_s: 1.0, jitter: 0, "
                  "max_attempts: 5}", timeout=30)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].startswith(f"vapipe: error: gave up on {url} after 5 attempts: ")
    _, events = read_jsonl(out / "cam.jsonl")
    assert event_states(events) == ["connecting", "reconnecting"] * 4 + ["connecting", "gave_up"], events
    delays = [e["delay_s"] for e in events if e["event"] == "reconnecting"]
    assert delays == [0.2, 0.4, 0.8, 1.0], delays
    assert [e["attempt"] for e in events if e["event"] == "connecting"] == [1, 2, 3, 4, 5]
    gaps = [b["time"] - a["time"] for a, b in zip(events, events[1:]) if a["event"] == "reconnecting"]
    assert all(g >= d - 0.05 for g, d in zip(gaps, delays)), (gaps, delays)
    assert events[-1]["attempts"] == 5 and "Connection refused" in events[-1]["reason"], events[-1]


def test_unreachable_camera_does_not_stop_the_others(config: Path, clip: Path, tmp_path: Path) -> None:
    """Multi-camera run: one camera gives up, the file camera still delivers all its frames."""
    url = f"rtsp://127.0.0.1:{free_port()}/cam"
    out = tmp_path / "out"
    proc = vapipe("run", "events", "--config", str(config), "--source", url, "--source", str(clip),
                  "--output", str(out), "--json", "--no-progress", "--max-frames", "60",
                  "--set", "decode.realtime=true",
                  "--set", "decode.reconnect={initial_s: 0.2, max_s: 0.5, max_attempts: 3}", timeout=60)
    summary = json_summary(proc)
    cam, filecam = source_stats(summary, "cam"), source_stats(summary, clip.stem)
    assert cam["error"] and "gave up" in cam["error"], cam
    assert filecam["frames"] == 60 and filecam["error"] is None, filecam
    assert cam["events"] == {"connecting": 3, "reconnecting": 2, "gave_up": 1}, cam


# f ----------------------------------------------------------------------------------------------

def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def test_slow_stage_live_drops_with_bounded_memory(rtsp_server: Server, config: Path, tmp_path: Path) -> None:
    """A 250 ms/frame stage on a 10 fps live stream: the source drops the oldest frames
    (counted), memory stays flat."""
    out = tmp_path / "out"
    proc = vapipe_popen("run", "slow", "--config", str(config), "--source", rtsp_server.url,
                        "--output", str(out), "--json", "--no-progress", "--max-frames", "80")
    rss: list[tuple[float, float]] = []
    t0 = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - t0 < 60:
            value = _rss_mb(proc.pid)
            if value is not None:
                rss.append((time.monotonic() - t0, value))
            time.sleep(0.5)
    finally:
        code, stdout, stderr = finish(proc) if proc.poll() is None else (proc.returncode, *proc.communicate())
    assert code == 0, stderr
    cam = source_stats(json.loads(stdout), "cam")
    frames, _ = read_jsonl(out / "cam.jsonl")
    steady = [v for t, v in rss if t >= 8]  # after connecting, probing and the first frames
    growth = max(steady) - steady[0]
    print(f"\nframes {cam['frames']} decoded {cam['decoded']} dropped {cam['dropped']} "
          f"fps {cam['fps']}; RSS {steady[0]:.1f} -> max {max(steady):.1f} MB (+{growth:.1f}) over "
          f"{rss[-1][0] - 8:.0f} s")
    assert cam["frames"] == 80 and len(frames) == 80
    assert cam["dropped"] >= 80, cam        # ~6 of every 10 frames cannot be processed in time
    assert cam["fps"] < 4.5, cam
    assert growth < 25, rss


def test_slow_stage_file_source_drops_nothing(config: Path, clip: Path, tmp_path: Path) -> None:
    """The same stage on a file source: backpressure, every frame goes through."""
    out = tmp_path / "out"
    proc = vapipe("run", "slow", "--config", str(config), "--source", str(clip), "--output", str(out),
                  "--json", "--no-progress", "--max-frames", "40", timeout=60)
    assert proc.returncode == 0, proc.stderr
    src = source_stats(json_summary(proc), clip.stem)
    frames, _ = read_jsonl(out / f"{clip.stem}.jsonl")
    assert src["frames"] == src["decoded"] == 40 and src["dropped"] == 0, src
    assert [f["seq"] for f in frames] == list(range(40))

