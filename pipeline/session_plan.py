"""The thread plan of a :class:`pipeline.session.Session`: made for the sources it runs,
made again when cameras join (running cameras take the new inference settings) and when a
source that was to join fails to open."""

from __future__ import annotations

import logging
from typing import Any, Callable

__all__ = ["SessionPlanning"]

log = logging.getLogger("vapipe")


class SessionPlanning:
    """Planning of a session; the session provides ``graph``, ``opts``, ``costs``, ``plan``,
    ``plan_note``, ``process_wide``, ``_overrides``, ``_restore_global``, ``_cameras``,
    ``_live_ids()``, ``_alive()`` and ``_stopping()``."""

    graph: Any
    opts: Any
    costs: Any
    plan: Any
    plan_note: str
    process_wide: bool
    _overrides: dict[str, dict[str, Any]]
    _cameras: dict[str, Any]
    _restore_global: Callable[[], None]

    def _live_ids(self) -> list[str]:
        raise NotImplementedError  # the session's: ids of the cameras that run

    def _alive(self, source_id: str) -> bool:
        raise NotImplementedError  # the session's: whether that camera still runs

    def _stopping(self) -> bool:
        raise NotImplementedError  # the session's: whether it was told to stop

    def _plan(self, sources: int | list[str], measure: bool = True) -> Any:
        from .threads import plan_for_graph

        return plan_for_graph(self.graph, sources, self.opts.cores, self._user_overrides(),  # user-set values win
                              costs=self.costs, measure=measure)

    def _plan_overrides(self, plan: Any) -> dict[str, dict[str, Any]]:
        from .threads import plan_overrides

        return plan_overrides(plan, self.graph, self._user_overrides())

    def _user_overrides(self) -> dict[str, dict[str, Any]]:
        """The stage parameters the user set: ``opts.overrides`` and the run's requests per camera
        (:meth:`pipeline.run_options.RunOptions.user_requests`)."""
        out = {k: dict(v) for k, v in self.opts.overrides.items()}
        for name, requests in self.opts.user_requests(self.graph).items():
            out.setdefault(name, {})["requests"] = requests
        return out

    def _revise_plan(self, new_uris: list[str]) -> dict[str, dict[str, Any]]:
        """The plan for the running sources and ``new_uris``; overrides for cameras added now.
        Running cameras take the new plan's inference settings before their next frame
        (:meth:`pipeline.stage.InferStage.reconfigure`; their frames in flight finish on the old
        compiled model), so every camera shares the newly compiled models.  A stop while the
        costs are measured (a first start compiles and times every model: seconds) raises
        :class:`~pipeline.left_readers.Stopped` at once; nothing changes then."""
        from .left_readers import run_unless_stopped

        uris = [self._cameras[sid].uri for sid in self._live_ids()] + list(new_uris)
        plan = run_unless_stopped(lambda: self._plan(uris), self._stopping, lambda _plan: None)
        fresh = self._plan_overrides(plan)
        changed = sorted(n for n in plan.infer if plan.infer.get(n) != self.plan.infer.get(n)
                         or plan.requests.get(n) != self.plan.requests.get(n))
        live = [c for c in self._cameras.values() if self._alive(c.source_id)]
        for cam in live:
            for name in changed:
                stage = cam.stages.get(name)
                if stage is not None and hasattr(stage, "reconfigure") and name in fresh:
                    stage.reconfigure({k: v for k, v in fresh[name].items() if k in ("config", "requests")})
        self.plan_note = f"re-planned running cameras: {', '.join(changed)}" if live and changed else ""
        self.plan, self._overrides = plan, fresh
        if self.process_wide:
            from .threads import apply_global

            self._restore_global()
            self._restore_global = apply_global(self.plan)
        return self._overrides

    def _plan_without_failed(self) -> None:
        """After sources failed to open: the plan for the cameras that run (the revised one
        counted the failed ones, and would stay a camera or more too large)."""
        if not self._live_ids():  # none runs (a run whose sources failed ends here)
            return
        try:
            self._revise_plan([])
        except Exception as exc:  # noqa: BLE001 - the add's own error is the one to report
            log.debug("could not plan again without the sources that failed to open: %s", exc)
