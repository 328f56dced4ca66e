"""Session: sources added and removed while a run goes on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pipeline.left_readers import Stopped, readers_left
from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions
from pipeline.session import Session
from pipeline.testing import COLLECTED, CollectSink
from tests.cluster.helpers import make_clip
from tests.live.helpers import quiet_stream

PACED = """
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {realtime: true, loop: true, fps: 25}}
      - {name: infer, type: "pipeline.testing:SleepInfer", params: {ms: 3, requests: 2}}
      - {name: session_sink, type: "pipeline.testing:CollectSink"}
"""

DETECT = """
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {realtime: true, loop: true, fps: 25}}
      - {name: person_detect, type: detect, params: {model: mediapipe/pose_detection, decoder: pose}}
"""


def _session(text: str, tmp_path: Path, **kw) -> Session:
    graph = build_graph(parse_config(text, "t.yaml").get("p"))
    return Session(graph, RunOptions(output_dir=tmp_path, handle_signals=False, **kw))


def _rate(session: Session, source_id: str, seconds: float) -> float:
    cam = next(c for c in session.cameras() if c.source_id == source_id)
    n0, t0 = cam.stats.processed, time.monotonic()
    time.sleep(seconds)
    return (cam.stats.processed - n0) / (time.monotonic() - t0)


def test_sources_come_and_go_while_the_others_keep_their_rate(tmp_path: Path) -> None:
    session = _session(PACED, tmp_path)
    try:
        [a] = session.add_sources(["testsrc://bars?width=160&height=120"])
        time.sleep(0.5)
        alone = _rate(session, a, 1.5)
        b = session.add_source("testsrc://bars?width=160&height=120")
        assert b != a  # same URI, distinct id
        together = _rate(session, a, 1.5)
        stats_b = session.remove_source(b)
        after = _rate(session, a, 1.0)
        assert session.running
        with pytest.raises(KeyError):
            session.remove_source(b)
    finally:
        summary = session.close()
    assert summary.error is None
    for rate in (together, after):
        assert abs(rate - alone) <= 0.2 * alone, (alone, together, after)
    assert stats_b.processed > 10 and stats_b.ended is not None
    frames_b = COLLECTED["session_sink"][b]
    assert [f.seq for f in frames_b] == list(range(len(frames_b)))  # in order, nothing lost before removal
    assert len(frames_b) == stats_b.processed
    frames_a = COLLECTED["session_sink"][a]
    assert [f.seq for f in frames_a] == list(range(len(frames_a)))
    assert {s.source for s in summary.sources} == {a, b}


def test_a_removed_source_does_not_end_the_session_and_a_new_one_can_join(tmp_path: Path) -> None:
    session = _session(PACED, tmp_path)
    try:
        [a] = session.add_sources(["testsrc://bars?width=96&height=64"])
        time.sleep(0.3)
        session.remove_source(a)
        assert not session.wait(0.3) and not session.running  # idle, not finished
        c = session.add_source("testsrc://bars?width=96&height=64", source_id="cam-c")
        time.sleep(0.5)
        assert c == "cam-c" and [s["id"] for s in session.sources()] == ["cam-c"]
        assert session.sources()[0]["frames"] > 0
        with pytest.raises(ValueError, match="in use"):
            session.add_source("testsrc://bars", source_id="cam-c")
        session.stop()
        deadline = time.monotonic() + 15
        while not session.wait(0.25):
            assert time.monotonic() < deadline
    finally:
        session.close()
    with pytest.raises(RuntimeError, match="stopping"):
        session.add_source("testsrc://bars")


def test_a_source_that_cannot_open_is_refused_alone(tmp_path: Path) -> None:
    session = _session(PACED, tmp_path)
    try:
        [a] = session.add_sources(["testsrc://bars?width=96&height=64"])
        planned = session.plan.sources
        with pytest.raises(Exception, match="missing.mp4"):
            session.add_source(str(tmp_path / "missing.mp4"))
        time.sleep(0.3)
        assert [s["id"] for s in session.sources()] == [a] and session.sources()[0]["state"] == "streaming"
        assert session.plan.sources == planned == 1  # the failed camera is not planned for
    finally:
        assert session.close().error is None


def _pose_detector() -> None:
    from pipeline.models import resolve_model

    try:
        resolve_model("mediapipe/pose_detection")
    except FileNotFoundError as exc:
        pytest.skip(f"needs the pose detector ({exc})")


def _replans_for_two(session: Session) -> None:
    """The session's plan for two sources gives every model one more thread than for one."""
    real = session._plan

    def plan(sources, measure=True):
        p = real(sources, measure)
        if not isinstance(sources, int) and len(sources) == 2:
            p.infer = {n: {**c, "INFERENCE_NUM_THREADS": c["INFERENCE_NUM_THREADS"] + 1} for n, c in p.infer.items()}
        return p

    session._plan = plan


def test_added_cameras_share_the_compiled_model_and_running_cameras_take_the_revised_plan(tmp_path: Path) -> None:
    _pose_detector()
    session = _session(DETECT, tmp_path, cores=8)
    _replans_for_two(session)
    try:
        [a] = session.add_sources(["testsrc://bars?width=320&height=240"])
        plan_one = session.plan
        time.sleep(1.0)
        b = session.add_source("testsrc://bars?width=320&height=240")
        time.sleep(1.5)
        cams = {c.source_id: c for c in session.cameras()}
        routes = [next(iter(cams[s].stages["person_detect"]._routes.values())) for s in (a, b)]
        assert routes[0].model is routes[1].model  # one compiled model, a request pool per camera
        assert routes[0].pool is not routes[1].pool
        assert session.plan.sources == 2 and plan_one.sources == 1
        threads = {n: c["INFERENCE_NUM_THREADS"] for n, c in session.plan.infer.items()}
        assert threads == {n: c["INFERENCE_NUM_THREADS"] + 1 for n, c in plan_one.infer.items()}
        assert "re-planned running cameras: person_detect" in session.plan_note
        # the first camera took the new plan too: both cameras run on the newly compiled model
        for cam in cams.values():
            assert cam.stages["person_detect"].params.config["INFERENCE_NUM_THREADS"] == threads["person_detect"]
        assert all(s["frames"] > 0 for s in session.sources())
    finally:
        summary = session.close()
    assert summary.error is None and "2 sources" in summary.threads


@pytest.mark.parametrize("kw, requests", [({"requests": 1}, 1), ({"requests": 3}, 3), ({"sync": True}, 1)])
def test_running_cameras_keep_the_requests_the_user_set_through_a_revised_plan(
        tmp_path: Path, kw: dict, requests: int) -> None:
    """``requests`` (``--requests N``; ``--sync``: 1) is the user's for every camera: the plan,
    made again when a camera joins, leaves it to the cameras that run and to the new one."""
    _pose_detector()
    session = _session(DETECT, tmp_path, cores=8, **kw)
    _replans_for_two(session)
    try:
        [a] = session.add_sources(["testsrc://bars?width=320&height=240"])
        time.sleep(0.5)
        b = session.add_source("testsrc://bars?width=320&height=240")
        threads = session.plan.infer["person_detect"]["INFERENCE_NUM_THREADS"]
        first = next(c for c in session.cameras() if c.source_id == a).stages["person_detect"]
        deadline = time.monotonic() + 10
        while first.params.config["INFERENCE_NUM_THREADS"] != threads:  # the first camera re-planned
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
        assert "re-planned running cameras: person_detect" in session.plan_note
        for cam in session.cameras():
            stage = cam.stages["person_detect"]
            assert stage.params.requests == requests, cam.source_id
            assert [r.pool.size for r in stage._routes.values()] == [requests], cam.source_id
        assert "person_detect" not in session.plan.requests
        assert {s["id"] for s in session.sources() if s["frames"] > 0} == {a, b}
    finally:
        summary = session.close()
    assert summary.error is None

SLOW_END = """
pipelines:
  p:
    stages:
      - {name: src, type: decode}
      - {name: infer, type: "pipeline.testing:SleepInfer", params: {ms: 40, requests: 1}}
"""


def test_waiting_for_the_last_frames_after_the_reader_ended_costs_no_cpu(tmp_path: Path) -> None:
    """A file's reader ends once its last packets are queued, while the frames before them are
    still being worked on; supervising that drain must sleep, not spin on the ended thread."""
    session = _session(SLOW_END, tmp_path)
    try:
        [a] = session.add_sources(["testsrc://bars?width=96&height=64&frames=40"])
        read, *_, work = session._threads[a]
        drain_wall = drain_cpu = 0.0
        while True:
            draining = not read.is_alive() and work.is_alive()
            wall, cpu = time.monotonic(), time.thread_time()
            if session.wait(0.1):
                break
            if draining:
                drain_wall += time.monotonic() - wall
                drain_cpu += time.thread_time() - cpu
    finally:
        assert session.close().error is None
    assert drain_wall >= 0.3, drain_wall  # the reader did end well before the last frame
    assert drain_cpu <= 0.1 * drain_wall, (drain_cpu, drain_wall)


def test_reconnects_count_every_connection_after_the_first() -> None:
    """A camera back at the first attempt reconnected too (no ``reconnecting`` backoff event)."""
    from pipeline.stats import SourceStats

    def reconnects(events: dict[str, int]) -> int:
        return SourceStats("cam", events=events).reconnects

    assert reconnects({"connecting": 1, "streaming": 1}) == 0
    assert reconnects({"connecting": 2, "streaming": 2, "stalled": 1}) == 1  # back at once
    assert reconnects({"connecting": 4, "reconnecting": 2, "streaming": 2, "ended": 1}) == 3
    assert reconnects({}) == 0


QUIET = """
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {read_timeout_s: 3, open_timeout_s: 5}}
      - {name: session_sink, type: "pipeline.testing:CollectSink"}
"""


def test_a_camera_that_went_quiet_is_removed_at_once_and_its_reader_closes_the_stream_later(
        tmp_path: Path) -> None:
    client_closed, done = threading.Event(), threading.Event()
    data = make_clip(tmp_path / "cam.ts", 50, size=(160, 120)).read_bytes()  # MPEG-TS: a stream as sent
    url = quiet_stream(data[: len(data) // 2], client_closed, done)
    session = _session(QUIET, tmp_path)
    try:
        [sid] = session.add_sources([url])
        cam = next(c for c in session.cameras() if c.source_id == sid)
        deadline = time.monotonic() + 20
        while not (cam.stats.processed and cam.source.in_read) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # well inside the quiet read (read timeout 3 s)
        assert cam.stats.processed > 0 and cam.source.in_read
        t0 = time.monotonic()
        session.remove_source(sid)
        assert time.monotonic() - t0 < 1.0
        # the read still blocks; its thread closes the stream when the read timeout ends it
        assert [t.name for t in readers_left()] == [f"{sid}:read"]
        assert not client_closed.is_set()
        assert client_closed.wait(6)
        deadline = time.monotonic() + 2
        while readers_left() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert readers_left() == []
    finally:
        done.set()
        session.close()


OPENS_AS_FILE = """
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {live: false, open_timeout_s: 4}}
      - {name: session_sink, type: "pipeline.testing:CollectSink"}
"""


def test_a_stop_while_a_stream_read_as_a_file_opens_returns_at_once_and_starts_nothing(tmp_path: Path) -> None:
    """``live: false`` opens the stream in add_sources, which waits up to the open timeout
    inside FFmpeg; a stop (Ctrl-C) must not."""
    client_closed, done = threading.Event(), threading.Event()
    url = quiet_stream(b"", client_closed, done)  # answers the request, then sends nothing
    session = _session(OPENS_AS_FILE, tmp_path)
    try:
        threading.Timer(0.5, session.stop).start()
        t0 = time.monotonic()
        with pytest.raises(Stopped):
            session.add_sources([url])
        assert time.monotonic() - t0 < 1.5
        assert session.cameras() == [] and session.wait(0.1)
        assert not client_closed.is_set()  # the open goes on, and gives up at its timeout
        assert client_closed.wait(6)
        summary = session.close()
        assert summary.error is None and [s.processed for s in summary.sources] == [0]
    finally:
        done.set()
        session.close()


def test_a_stop_while_the_costs_are_measured_returns_at_once_and_keeps_the_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first start compiles and times every model before any source opens (seconds on a cold
    cache); a stop meanwhile does not wait for that either, and leaves the plan as it was."""
    from pipeline.session_plan import SessionPlanning

    real, measuring = SessionPlanning._plan, threading.Event()

    def slow_plan(self, sources, measure: bool = True):
        if measure:
            measuring.set()
            time.sleep(5)
        return real(self, sources, measure)

    monkeypatch.setattr(SessionPlanning, "_plan", slow_plan)
    session = _session(PACED, tmp_path)
    plan = session.plan
    try:
        threading.Thread(target=lambda: measuring.wait(5) and session.stop(), daemon=True).start()
        t0 = time.monotonic()
        with pytest.raises(Stopped):
            session.add_sources([str(make_clip(tmp_path / "clip.mp4", frames=10))])
        assert time.monotonic() - t0 < 1.5
        assert session.cameras() == [] and session.plan is plan
    finally:
        session.close()


DROPS_THEN_SLOW_CLOSE = """
pipelines:
  p:
    stages:
      - {name: src, type: decode, params: {realtime: true, loop: true, fps: 200, live: true}}
      - {name: infer, type: "pipeline.testing:SleepInfer", params: {ms: 40, requests: 1}}
      - {name: slow_close, type: "tests.pipeline.test_session:SlowClose"}
"""


class SlowClose(CollectSink):
    """A sink whose close waits for ``release`` (an MQTT sink flushing to a broker that is away)."""

    closing = threading.Event()
    release = threading.Event()

    def close(self) -> None:
        SlowClose.closing.set()
        SlowClose.release.wait(10)


def test_the_frames_a_camera_dropped_never_go_down_while_it_closes(tmp_path: Path) -> None:
    SlowClose.closing.clear()
    SlowClose.release.clear()
    session = _session(DROPS_THEN_SLOW_CLOSE, tmp_path, cores=0)
    try:
        session.add_sources(["testsrc://bars?width=96&height=64"])
        deadline = time.monotonic() + 10
        while session.sources()[0]["dropped"] < 5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        running = session.sources()[0]["dropped"]
        session.stop()
        supervisor = threading.Thread(target=session.wait, args=(15,))
        supervisor.start()
        assert SlowClose.closing.wait(10)
        closing = session.sources()[0]["dropped"]
        SlowClose.release.set()
        supervisor.join(10)
        closed = session.sources()[0]["dropped"]
    finally:
        SlowClose.release.set()
        summary = session.close()
    assert 5 <= running <= closing == closed == summary.sources[0].dropped, (running, closing, closed)


DRAINS = """
pipelines:
  p:
    stages:
      - {name: src, type: decode}
      - {name: infer, type: "pipeline.testing:SleepInfer", params: {ms: 40, requests: 1}}
      - {name: encode, type: encode, params: {preset: ultrafast, path: "%s"}}
      - {name: readd_sink, type: "pipeline.testing:CollectSink"}
"""
READD = "testsrc://bars?width=96&height=64&frames=40"


def _removing(session: Session, source_id: str) -> threading.Thread:
    """``remove_source(source_id)`` on a thread, returned while it still waits for frames in flight."""
    removal = threading.Thread(target=session.remove_source, args=(source_id,))
    removal.start()
    time.sleep(0.1)
    assert removal.is_alive()
    return removal


def _wait_end(session: Session) -> None:
    deadline = time.monotonic() + 20
    while not session.wait(0.25):
        assert time.monotonic() < deadline


def test_a_source_added_again_while_its_removal_finishes_gets_an_id_of_its_own(tmp_path: Path) -> None:
    """Until a removed camera's frames in flight are done, its id and its files stay its own: the
    same URI added meanwhile is a new camera beside it, and the other cameras go on."""
    session = _session(DRAINS % "{output}/{source}.mp4", tmp_path, cores=0)
    try:
        [a, other] = session.add_sources([READD, READD], ids=["bars", "other"])
        time.sleep(0.5)
        removal = _removing(session, a)
        b = session.add_source(READD)
        with pytest.raises(ValueError, match="in use"):
            session.add_source(READD, source_id=a)
        removal.join()
        _wait_end(session)
    finally:
        summary = session.close()
    assert b == "bars-2"
    assert session.failures == [] and summary.error is None
    frames = {s.source: s.processed for s in summary.sources}
    assert frames == {a: frames[a], other: 40, b: 40} and frames[a] > 10  # the removed one: what it read
    assert [f.seq for f in COLLECTED["readd_sink"][a]] == list(range(frames[a]))
    assert sorted(p.name for p in tmp_path.glob("*.mp4")) == ["bars-2.mp4", "bars.mp4", "other.mp4"]


def test_a_source_that_would_write_the_file_of_a_camera_being_removed_is_refused(tmp_path: Path) -> None:
    session = _session(DRAINS % "{output}/one.mp4", tmp_path, cores=0)
    try:
        [a] = session.add_sources([READD])
        time.sleep(0.5)
        removal = _removing(session, a)
        with pytest.raises(ValueError, match="one.mp4"):
            session.add_source(READD)
        removal.join()
        b = session.add_source(READD)  # the file is free again
        _wait_end(session)
    finally:
        summary = session.close()
    assert session.failures == [] and summary.error is None
    frames = {s.source: s.processed for s in summary.sources}
    assert frames == {a: frames[a], b: 40} and frames[a] > 10
