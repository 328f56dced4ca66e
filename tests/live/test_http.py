"""HTTP live sources (MJPEG, HLS) and RTSP over UDP, end to end through the ``vapipe`` CLI.

The HTTP servers are tests/live/http_server.py subprocesses (plain ``http.server``) on
free ports of 127.0.0.1, killed at teardown; every run is a subprocess with a hard
timeout.  The clip is the session's synthetic clip (tests/media.py: 10 fps, a keyframe
every second).

What these tests pin down:

* MJPEG over HTTP (``multipart/x-mixed-replace``) needs no format hint: FFmpeg's
  ``mpjpeg`` demuxer is chosen by probing the body (a ``--boundary`` line followed by
  a ``Content-Type: image/jpeg`` part header), whatever Content-Type the server sends.
  A body that is not a recognised stream is a one-line error naming the URL.
* HLS: a finished playlist (``#EXT-X-ENDLIST``, VOD) is a recording.  With
  ``decode.live=false`` it is read as a file: every frame, nothing dropped, the run
  ends with exit 0.  With the default for http URLs (live) it is read as a camera:
  segments are spread out at the stream's frame rate (as a player does; FFmpeg fetches
  whole segments at once), frames the pipeline cannot take in time are dropped, and the
  source ends at the end of the playlist instead of reading it again from the start.
  A live playlist (no ``#EXT-X-ENDLIST``) that stops growing is reconnected like any
  other camera.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from tests.media import CLIP

from .helpers import (
    HttpServer,
    Server,
    event_states,
    finish,
    json_summary,
    read_jsonl,
    source_stats,
    vapipe,
    vapipe_popen,
    wait_for,
)

WIDTH, HEIGHT = CLIP.width, CLIP.height
HLS_FRAMES = 80  # 8 s of the clip: 4 segments of 2 s

CONFIG = """\
pipelines:
  events:
    stages:
      - {name: decode, type: decode}
      - {name: metadata, type: metadata}
"""


@pytest.fixture
def mjpeg(http_server: Callable[..., HttpServer], clip: Path) -> Callable[..., HttpServer]:
    """mjpeg(*args) -> an MJPEG camera at http://127.0.0.1:PORT/stream.mjpg looping 100 frames."""
    return lambda *args: http_server("mjpeg", "/stream.mjpg", "--clip", str(clip), "--frames", "100", *args)


def _write_hls(clip: Path, folder: Path, frames: int, finished: bool = True) -> None:
    """The first ``frames`` frames of the clip (H.264, remuxed, no re-encoding) as 2 s MPEG-TS
    segments and index.m3u8, with FFmpeg's ``hls`` muxer; ``finished=False`` leaves out
    #EXT-X-ENDLIST (and the VOD type), as in a live playlist."""
    import av

    folder.mkdir(parents=True, exist_ok=True)
    with av.open(str(clip)) as src:
        stream = src.streams.video[0]
        options = {"hls_time": "2", "hls_list_size": "0", "hls_playlist_type": "vod",
                   "hls_segment_filename": str(folder / "seg%03d.ts")}
        with av.open(str(folder / "index.m3u8"), "w", format="hls", options=options) as out:
            ostream = out.add_stream_from_template(stream)
            n = 0
            for packet in src.demux(stream):
                if packet.dts is None:
                    continue
                if n >= frames:
                    break
                packet.stream = ostream
                out.mux(packet)
                n += 1
    playlist = folder / "index.m3u8"
    text = playlist.read_text(encoding="utf-8")
    assert "#EXT-X-ENDLIST" in text, text
    if not finished:
        lines = [ln for ln in text.splitlines() if ln not in ("#EXT-X-ENDLIST", "#EXT-X-PLAYLIST-TYPE:VOD")]
        playlist.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def hls(http_server: Callable[..., HttpServer], clip: Path, tmp_path: Path) -> Callable[[bool], HttpServer]:
    """hls(finished) -> a file server with a playlist of HLS_FRAMES frames at /index.m3u8."""

    def make(finished: bool = True) -> HttpServer:
        folder = tmp_path / ("vod" if finished else "live")
        _write_hls(clip, folder, HLS_FRAMES, finished)
        return http_server("files", "/index.m3u8", "--dir", str(folder))

    return make


# 1. MJPEG over HTTP -----------------------------------------------------------------------------

def test_mjpeg_max_frames(mjpeg, tmp_path: Path) -> None:
    """`vapipe run persons --source http://.../stream.mjpg --max-frames 50 --json`: 50 frames
    of the right size, paced by the camera (10 fps), connecting then streaming."""
    server = mjpeg()
    out = tmp_path / "out"
    proc = vapipe("run", "persons", "--source", server.url, "--max-frames", "50", "--output", str(out),
                  "--json", "--no-progress", timeout=30)
    assert proc.returncode == 0, proc.stderr
    summary = json_summary(proc)
    src = source_stats(summary, "stream")
    assert src["frames"] == 50 and src["error"] is None, src
    assert src["events"] == {"connecting": 1, "streaming": 1}, src
    assert src["decode_errors"] == 0, src
    frames, events = read_jsonl(out / "stream.jsonl")
    assert len(frames) == 50
    assert event_states(events) == ["connecting", "streaming"]
    assert {(f["width"], f["height"]) for f in frames} == {(WIDTH, HEIGHT)}
    assert [f["seq"] for f in frames] == list(range(50))
    assert summary["wall_s"] >= 4.0, summary  # 50 frames of a 10 fps camera take ~5 s


def test_mjpeg_server_killed_and_restarted(mjpeg, config: Path, tmp_path: Path) -> None:
    """SIGKILL the MJPEG server mid-run: the connection ends (ended, or stalled on a read
    error), reconnecting fails while the port is closed (reconnecting, with backoff), and
    the stream comes back once the server is started again on the same port."""
    server = mjpeg()
    out = tmp_path / "out"
    jsonl = out / "stream.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", server.url,
                        "--output", str(out), "--json", "--no-progress",
                        "--set", "decode.read_timeout_s=2", "--set", "decode.open_timeout_s=2",
                        "--set", "decode.reconnect={initial_s: 0.3, max_s: 1.0}")
    try:
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= 10, 20, "10 frames", proc)
        server.kill()
        wait_for(lambda: "reconnecting" in event_states(read_jsonl(jsonl)[1]), 10, "reconnecting", proc)
        time.sleep(1.0)
        server.start()
        before = len(read_jsonl(jsonl)[0])
        wait_for(lambda: event_states(read_jsonl(jsonl)[1]).count("streaming") >= 2, 15, "streaming again", proc)
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= before + 10, 10, "10 more frames", proc)
    finally:
        code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    src = source_stats(json.loads(stdout), "stream")
    events = read_jsonl(jsonl)[1]
    states = event_states(events)
    print(f"\nevents: {states}\nreconnect_s: {src['reconnect_s']}")
    assert states[:2] == ["connecting", "streaming"], states
    assert states[2] == "stalled", states  # a dropped stream is not "ended": that state is final
    assert states[3] == "connecting" and "reconnecting" in states[3:], states
    assert states[-1] == "streaming" and states.count("streaming") == 2, states
    refused = next(e for e in events if e["event"] == "reconnecting")
    # refused once the port is closed; reset when the kernel had queued the connection
    assert ("Connection refused" in refused["reason"] or "Connection reset" in refused["reason"]), refused
    assert refused["delay_s"] > 0, refused
    assert len(src["reconnect_s"]) == 1 and src["reconnect_s"][0] >= 1.0, src
    assert src["error"] is None and src["decode_errors"] == 0, src


@pytest.mark.parametrize("body", ["html", "noise"])
def test_unrecognised_http_stream_is_one_line(http_server, config: Path, tmp_path: Path, body: str) -> None:
    """A URL that answers with something that is not a video stream (a login page, random
    bytes): the source gives up after max_attempts with one line naming the URL."""
    folder = tmp_path / "www"
    folder.mkdir()
    if body == "html":
        (folder / "stream.mjpg").write_text("<html><body>login</body></html>\n", encoding="utf-8")
    else:
        # seeded: about one noise buffer in 50 is misread by FFmpeg's probe (as H.263 or
        # LRC subtitles); tests/faults covers those, this one is rejected outright
        (folder / "stream.mjpg").write_bytes(random.Random(0).randbytes(200_000))
    server = http_server("files", "/stream.mjpg", "--dir", str(folder))
    proc = vapipe("run", "events", "--config", str(config), "--source", server.url,
                  "--output", str(tmp_path / "out"), "--no-progress", "--set", "decode.open_timeout_s=3",
                  "--set", "decode.reconnect={max_attempts: 1}", timeout=30)
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("vapipe: error:")]
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"vapipe: error: gave up on {server.url} after 1 attempt: cannot open source "
                                f"{server.url}: Invalid data found when processing input"), proc.stderr
    assert "Traceback" not in proc.stderr


# 2. HLS ------------------------------------------------------------------------------------------

def test_hls_max_frames(hls, tmp_path: Path) -> None:
    """`vapipe run persons --source http://.../index.m3u8 --max-frames 40`."""
    server = hls(True)
    out = tmp_path / "out"
    proc = vapipe("run", "persons", "--source", server.url, "--max-frames", "40", "--output", str(out),
                  "--json", "--no-progress", timeout=30)
    assert proc.returncode == 0, proc.stderr
    src = source_stats(json_summary(proc), "index")
    assert src["frames"] == 40 and src["error"] is None, src
    frames, _ = read_jsonl(out / "index.jsonl")
    assert len(frames) == 40
    assert {(f["width"], f["height"]) for f in frames} == {(WIDTH, HEIGHT)}


def test_hls_vod_as_file_reads_every_frame(hls, config: Path, tmp_path: Path) -> None:
    """A finished playlist with decode.live=false is a file: every frame once, in order,
    nothing dropped, no reconnects, exit 0."""
    server = hls(True)
    out = tmp_path / "out"
    proc = vapipe("run", "events", "--config", str(config), "--source", server.url, "--output", str(out),
                  "--json", "--no-progress", "--set", "decode.live=false", timeout=30)
    assert proc.returncode == 0, proc.stderr
    src = source_stats(json_summary(proc), "index")
    frames, events = read_jsonl(out / "index.jsonl")
    assert src["frames"] == src["decoded"] == HLS_FRAMES and src["dropped"] == 0, src
    assert [f["seq"] for f in frames] == list(range(HLS_FRAMES))
    assert events == [] and src["events"] == {}, events
    times = [f["pts_time"] for f in frames]
    assert all(b > a for a, b in zip(times, times[1:])), times


def test_hls_vod_as_live_source_ends(hls, config: Path, tmp_path: Path) -> None:
    """The same playlist with the default (live, as every http URL): read as a camera, at
    the stream's rate (10 fps: ~8 s), and the source ends at #EXT-X-ENDLIST instead of
    reading the playlist again and again."""
    server = hls(True)
    out = tmp_path / "out"
    proc = vapipe("run", "events", "--config", str(config), "--source", server.url, "--output", str(out),
                  "--json", "--no-progress", timeout=30)
    assert proc.returncode == 0, proc.stderr
    summary = json_summary(proc)
    src = source_stats(summary, "index")
    frames, events = read_jsonl(out / "index.jsonl")
    assert event_states(events) == ["connecting", "streaming", "ended"], events
    assert "#EXT-X-ENDLIST" in events[-1]["reason"], events[-1]
    assert src["decoded"] == HLS_FRAMES and src["frames"] + src["dropped"] == HLS_FRAMES, src
    assert len(frames) == src["frames"] > 0 and src["error"] is None, src
    # paced: a few frames lost to scheduling jitter at most (unpaced, FFmpeg hands over whole
    # segments at once and the newest-frames queue dropped ~90 % of them)
    assert src["dropped"] <= HLS_FRAMES // 5, src
    assert 6.0 <= summary["wall_s"] < 15, summary


def test_hls_live_playlist_reconnects(hls, config: Path, tmp_path: Path) -> None:
    """A playlist without #EXT-X-ENDLIST is live: when it stops growing, the stream ends and
    the source connects again (it is not mistaken for a finished recording)."""
    server = hls(False)
    out = tmp_path / "out"
    jsonl = out / "index.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", server.url, "--output", str(out),
                        "--json", "--no-progress", "--set", "decode.read_timeout_s=2",
                        "--set", "decode.open_timeout_s=2")
    try:
        wait_for(lambda: event_states(read_jsonl(jsonl)[1]).count("streaming") >= 2, 25, "a second connection", proc)
    finally:
        code, stdout, stderr = finish(proc)
    assert code == 0, stderr
    states = event_states(read_jsonl(jsonl)[1])
    assert states[:2] == ["connecting", "streaming"] and states[2] == "stalled", states
    assert states[3] == "connecting", states
    assert source_stats(json.loads(stdout), "index")["error"] is None


# 3. RTSP over UDP --------------------------------------------------------------------------------

def _udp_ports(pid: int) -> set[int]:
    """Local ports of the UDP sockets that process ``pid`` holds (from /proc)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("udp", "udp6"):
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def test_rtsp_over_udp(rtsp_server: Server, config: Path, tmp_path: Path) -> None:
    """`--set decode.transport=udp`: RTP arrives on UDP sockets of the vapipe process, 40 frames."""
    out = tmp_path / "out"
    jsonl = out / "cam.jsonl"
    proc = vapipe_popen("run", "events", "--config", str(config), "--source", rtsp_server.url,
                        "--output", str(out), "--json", "--no-progress", "--max-frames", "40",
                        "--set", "decode.transport=udp")
    udp: set[int] = set()
    try:
        wait_for(lambda: len(read_jsonl(jsonl)[0]) >= 5, 20, "5 frames", proc)
        udp = _udp_ports(proc.pid)
        stdout, stderr = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        finish(proc)
        raise AssertionError("vapipe did not finish 40 frames within 20 s") from None
    finally:
        if proc.poll() is None:
            finish(proc)
    assert proc.returncode == 0, stderr
    assert udp, "no UDP socket in the vapipe process while streaming"
    src = source_stats(json.loads(stdout), "cam")
    assert src["frames"] == 40 and src["error"] is None, src
    frames, events = read_jsonl(jsonl)
    assert event_states(events) == ["connecting", "streaming"], events
    assert {(f["width"], f["height"]) for f in frames} == {(WIDTH, HEIGHT)}


# 4. Undecodable packets ----------------------------------------------------------------------------

def test_undecodable_packets_trigger_reconnect(mjpeg, config: Path, tmp_path: Path) -> None:
    """The camera sends 15 good JPEG parts, then parts whose body is not a JPEG; after
    max_decode_errors undecodable packets in a row the source reconnects (stalled).  The
    camera answers 503 twice while it "restarts" (reconnecting, with backoff), then
    streams good frames again.  The errors are counted in the summary."""
    server = mjpeg("--garbage-after", "15", "--busy", "2")
    out = tmp_path / "out"
    proc = vapipe("run", "events", "--config", str(config), "--source", server.url, "--output", str(out),
                  "--json", "--no-progress", "--max-frames", "40", "--set", "decode.max_decode_errors=10",
                  "--set", "decode.reconnect={initial_s: 0.3, max_s: 0.6, jitter: 0}", timeout=30)
    assert proc.returncode == 0, proc.stderr
    src = source_stats(json_summary(proc), "stream")
    frames, events = read_jsonl(out / "stream.jsonl")
    states = event_states(events)
    print(f"\nevents: {states}\ndecode_errors: {src['decode_errors']}")
    assert states == ["connecting", "streaming", "stalled", "connecting", "reconnecting", "connecting",
                      "reconnecting", "connecting", "streaming"], events
    assert events[2]["reason"] == "10 undecodable packets in a row", events[2]
    assert all("Server returned 5XX" in e["reason"] for e in events if e["event"] == "reconnecting"), events
    assert [e["delay_s"] for e in events if e["event"] == "reconnecting"] == [0.3, 0.6], events
    assert src["decode_errors"] >= 10, src
    assert src["frames"] == 40 and len(frames) == 40 and src["error"] is None, src
    assert {(f["width"], f["height"]) for f in frames} == {(WIDTH, HEIGHT)}
    assert len(src["reconnect_s"]) == 1 and 0.9 <= src["reconnect_s"][0] < 10, src
