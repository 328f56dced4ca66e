"""Camera: closing its stages when a source ends."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from pipeline.testing import CollectSink

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
