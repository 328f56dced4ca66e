"""Camera: opening and closing its stages; the frames a live camera keeps; one camera stopping alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from pipeline.arbiter import SourcePriority
from pipeline.camera import LIVE_FRAMES, LIVE_FRAMES_URGENT, Camera
from pipeline.config import parse_config
from pipeline.frame import Frame
from pipeline.graph import build_graph
from pipeline.left_readers import Stopped
from pipeline.runtime import RunOptions, run_pipeline
from pipeline.testing import CollectSink, ListSource
from stages.sources.base import SourceError

PIPELINE = """
pipelines:
  p:
    stages:
      - {name: src, type: decode}
      - {name: unfinished, type: "tests.pipeline.test_camera:CloseFails"}
      - {name: camera_sink, type: "pipeline.testing:CollectSink"}
"""


class CloseFails(CollectSink):
    """A sink whose output cannot be finished (a full disk when the file is closed)."""

    def close(self) -> None:
        raise OSError(28, "No space left on device")


def test_an_output_that_cannot_be_finished_fails_the_run(tmp_path: Path) -> None:
    graph = build_graph(parse_config(PIPELINE, "t.yaml").get("p"))
    summary = run_pipeline(graph, ["testsrc://bars?width=160&height=120&frames=5"],
                           RunOptions(output_dir=tmp_path, handle_signals=False, cores=0))
    assert summary.error is not None, "the run reported success with an output left unfinished"
    assert "'unfinished'" in summary.error and "No space left on device" in summary.error
    assert "\n" not in summary.error


@pytest.mark.parametrize("level, kept", [("high", LIVE_FRAMES_URGENT), ("normal", LIVE_FRAMES), (None, LIVE_FRAMES)])
def test_a_high_priority_live_camera_keeps_more_frames_through_a_stall(tmp_path: Path, level: str | None,
                                                                        kept: int) -> None:
    """A live camera keeps its newest decoded frames while its worker is busy; a ``high`` one keeps
    more of them, so that a stall of the host delays its frames rather than dropping them."""
    graph = build_graph(parse_config(PIPELINE, "t.yaml").get("p"))
    opts = RunOptions(output_dir=tmp_path, handle_signals=False, overrides={"src": {"live": True}})
    cam = Camera(graph, "testsrc://bars?width=160&height=120&frames=5", "cam", opts, threading.Event(),
                 threading.Event(), {}, lambda msg: None, SourcePriority(level) if level else None)
    assert cam.live and cam.frames.policy == "drop_oldest"
    assert cam.frames.maxsize == kept and LIVE_FRAMES_URGENT > LIVE_FRAMES


STOPPED_WHILE_OPENING = """
pipelines:
  p:
    stages:
      - {name: src, type: "tests.pipeline.test_camera:StoppedWhileOpening"}
      - {name: camera_sink, type: "pipeline.testing:CollectSink"}
"""


class StoppedWhileOpening(ListSource):
    """A source whose camera is stopped while it opens (as a Ctrl-C during a stream's open)."""

    stop_event: threading.Event | None = None

    def open(self) -> None:
        super().open()
        assert self.stop_event is not None
        self.stop_event.set()


def test_a_camera_stopped_while_a_stage_opens_opens_no_further_stage(tmp_path: Path) -> None:
    graph = build_graph(parse_config(STOPPED_WHILE_OPENING, "t.yaml").get("p"))
    cam = Camera(graph, "list", "cam", RunOptions(output_dir=tmp_path, handle_signals=False), threading.Event(),
                 threading.Event(), {}, lambda msg: None)
    with pytest.raises(Stopped, match="'cam'"):
        cam.open()
    assert cam.source._opened and not cam.stages["camera_sink"]._opened


@pytest.mark.parametrize("size, with_image, depth", [((1280, 720), False, 16), ((1920, 1080), False, 10),
                                                      ((1920, 1080), True, 4), ((3840, 2160), False, 4),
                                                      ((320, 240), True, 16)])
def test_a_file_camera_queues_frames_by_their_bytes(tmp_path: Path, size: tuple[int, int], with_image: bool,
                                                    depth: int) -> None:
    """A file camera's decoder may work ahead by up to 32 MiB of decoded pixels (4 to 16 frames),
    sized by its first frame; a live camera keeps only its newest frames whatever their size."""
    from pipeline.frame import Frame
    from pipeline.queues import file_frames_depth

    assert file_frames_depth(*size, with_image, least=4) == depth
    graph = build_graph(parse_config(PIPELINE, "t.yaml").get("p"))
    for live in (False, True):
        opts = RunOptions(output_dir=tmp_path, handle_signals=False, overrides={"src": {"live": live}})
        cam = Camera(graph, "testsrc://bars?width=160&height=120&frames=5", "cam", opts, threading.Event(),
                     threading.Event(), {}, lambda msg: None)
        cam.needs_image = with_image
        before = cam.frames.maxsize
        assert cam._take(Frame(source_id="cam", seq=0, width=size[0], height=size[1]))
        assert cam.frames.maxsize == (before if live else depth)


SYNC = """
pipelines:
  p:
    stages:
      - {name: src, type: decode}
      - {name: camera_sink, type: "pipeline.testing:CollectSink"}
"""


def test_a_sync_camera_removed_stops_reading_at_once(tmp_path: Path) -> None:
    """``--sync`` reads, decodes and processes on one thread; removing the camera ends it after the
    frame it works on, not at the stop deadline."""
    from pipeline.session import Session

    out: list[float] = []
    graph = build_graph(parse_config(SYNC, "t.yaml").get("p"))
    opts = RunOptions(output_dir=tmp_path, handle_signals=False, cores=0, sync=True, stop_deadline_s=3.0)
    session = Session(graph, opts, process_wide=False, on_frame=lambda sid, frame: out.append(time.monotonic()))
    try:
        sid = session.add_source("testsrc://bars?width=96&height=64&frames=100000")
        time.sleep(0.3)
        t0 = time.monotonic()
        stats = session.remove_source(sid)
        took = time.monotonic() - t0
    finally:
        session.close()
    assert took < 1.0
    assert sum(1 for t in out if t > t0) <= 1 and stats.processed == len(out) > 0


GIVES_UP = """
pipelines:
  p:
    stages:
      - {name: src, type: "tests.pipeline.test_camera:GivesUp", params: {count: 30, decode_ms: 10}}
      - {name: camera_sink, type: "pipeline.testing:CollectSink"}
"""


class GivesUp(ListSource):
    """A list source; the one named ``gives-up`` fails to read at once (a camera that gave up),
    the one named ``cannot-decode`` fails to decode its first frame."""

    def units(self) -> Iterator[Any]:
        if self.params.uri == "gives-up":
            raise SourceError("gave up on gives-up after 1 attempt: Connection refused")
        yield from super().units()

    def decode_unit(self, unit: Any) -> list[Frame]:
        if self.params.uri == "cannot-decode":
            raise SourceError("cannot-decode: invalid data")
        return super().decode_unit(unit)


@pytest.mark.parametrize("sync", [False, True])
@pytest.mark.parametrize("failing", ["gives-up", "cannot-decode"])
def test_a_camera_whose_source_fails_stops_alone(tmp_path: Path, sync: bool, failing: str) -> None:
    """The other cameras of the run go on to their end (``--sync`` too); the run still fails."""
    graph = build_graph(parse_config(GIVES_UP, "t.yaml").get("p"))
    summary = run_pipeline(graph, [failing, "file"],
                           RunOptions(output_dir=tmp_path, handle_signals=False, cores=0, sync=sync))
    stats = {s.source: s for s in summary.sources}
    assert stats["file"].processed == 30 and stats["file"].error is None
    assert stats[failing].processed == 0 and failing in (stats[failing].error or "")
    assert summary.error == stats[failing].error
