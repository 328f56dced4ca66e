"""What a camera does when one of its stages raises: the stage's ``on_error`` policy.

``skip``: the frame is dropped, counted, and each kind of error of the stage is logged once;
``restart``: the stage is closed and opened again; ``stop`` (the default, except for
user stages ``module:Class``, which skip): the run ends with one line naming the stage,
the source and the error.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from .graph import PipelineGraph
from .ov_errors import one_line
from .run_options import StageFailure
from .stage import StageError
from .stats import SourceStats

__all__ = ["StageErrorPolicy", "MAX_RESTARTS", "one_line_error"]

log = logging.getLogger("vapipe")

#: a stage with ``on_error: restart`` restarted this often in a row, with no frame through it in
#: between, stops the run when it fails again (a stage that fails for good is not reopened forever)
MAX_RESTARTS = 3


class StageErrorPolicy:
    """The error policies of one camera's stages.  ``passed(name)``: frames the stage has
    let through so far (a restart after which none got through counts as one in a row)."""

    def __init__(self, graph: PipelineGraph, stages: dict[str, Any], source_id: str, stats: SourceStats,
                 passed: Callable[[str], int]) -> None:
        self.graph = graph
        self.stages = stages
        self.source_id = source_id
        self.stats = stats
        self.passed = passed
        self._seen: set[str] = set()
        #: stage -> (frames it had passed at its last restart, restarts in a row with none passed)
        self._restarts: dict[str, tuple[int, int]] = {}

    def handle(self, stage_name: str, exc: BaseException) -> bool:
        """True when the run goes on (the frame is skipped); raises :class:`StageFailure` to stop it."""
        spec = self.graph.graph.nodes[stage_name]["spec"]
        policy = spec.on_error or ("skip" if ":" in spec.type else "stop")
        kind = "" if isinstance(exc, (ValueError, FileNotFoundError, StageError)) else f"{type(exc).__name__}: "
        text = f"stage {stage_name!r} on source {self.source_id!r}: {kind}{one_line(exc)}"
        if policy == "skip":
            self.stats.skipped_errors += 1
            key = f"{stage_name}:{type(exc).__name__}"
            if key not in self._seen:  # once per stage and kind of error; the rest are counted
                self._seen.add(key)
                log.warning("%s (frame skipped; further %s errors of this stage are counted)", text,
                            type(exc).__name__, exc_info=exc if log.isEnabledFor(logging.DEBUG) else None)
            return True
        if policy == "restart":
            passed = self.passed(stage_name)
            last, in_a_row = self._restarts.get(stage_name, (-1, 0))
            in_a_row = in_a_row + 1 if passed == last else 1   # no frame got through since the last one
            if in_a_row > MAX_RESTARTS:  # failing for good: stop rather than reopen it forever
                raise StageFailure(f"{text} (failed again after {MAX_RESTARTS} restarts in a row with no "
                                   "frame through it; giving up)") from exc
            self._restarts[stage_name] = (passed, in_a_row)
            self.stats.skipped_errors += 1
            log.warning("%s (restarting the stage)", text)
            stage = self.stages[stage_name]
            stage.close()
            stage.ensure_open(reopen=True)
            return True
        raise StageFailure(text) from exc


def one_line_error(exc: BaseException, context: str) -> str:
    """``exc`` as one line for a run's failure, after ``context`` (which stage, which source)
    unless the message names its subject itself (bad values, missing files)."""
    text = one_line(exc)
    if isinstance(exc, (ValueError, FileNotFoundError)):
        return text
    if isinstance(exc, StageError):  # a stage's own message: it names the stage and the problem
        return f"{context}: {text}"
    return f"{context}: {type(exc).__name__}: {text}"
