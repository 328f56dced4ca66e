"""``vapipe tune``: find the fastest settings of a pipeline for one source on this machine.

Searched, one dimension at a time from the defaults (coordinate descent):

* ``requests`` — infer requests per camera of every inference stage (0 = device's optimal);
* ``streams`` — performance hint and ``NUM_STREAMS`` of every inference stage;
* ``decoder threads`` — ``threads`` of the source stage;
* ``resize`` — where Detect scales frames to the model input (auto/host/engine).

Every trial is a short run of the real runtime in a fresh subprocess (the same
worker ``vapipe bench`` uses, sinks replaced by an in-memory recorder) on the
first ``frames`` frames of each camera.  A value replaces the current one only
when it is more than ``MIN_GAIN`` faster (the machine is noisy).  Once a pass
over all dimensions is done (or the budget is nearly spent) the best few
configurations are measured again and the one with the best median wins.
The search stops when the budget would be exceeded by the next trial, or
when a whole pass changed nothing.  The result is a YAML file
``{stage: {param: value}}`` for ``vapipe run --overrides``.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import yaml

from .plan import BenchError, BenchPlan
from .runner import spawn_worker

__all__ = ["run_tune", "TuneResult", "Trial", "DIMENSIONS"]

MIN_GAIN = 0.03
#: dimension -> candidate values (the first is the default)
DIMENSIONS: dict[str, list[Any]] = {
    "requests": [0, 1, 2, 3, 4, 6],
    "streams": ["THROUGHPUT", "THROUGHPUT/1", "THROUGHPUT/2", "THROUGHPUT/4", "LATENCY"],
    "decoder threads": [0, 1, 2, 4],
    "resize": ["auto", "host", "engine"],
}


@dataclass
class Trial:
    settings: dict[str, Any]
    fps: list[float] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None

    @property
    def score(self) -> float:
        return statistics.median(self.fps) if self.fps else 0.0

    def key(self) -> tuple[Any, ...]:
        return tuple(sorted(self.settings.items()))


@dataclass
class TuneResult:
    pipeline: str
    source: str
    cameras: int
    frames: int
    trials: list[Trial]
    best: Trial
    default: Trial
    overrides: dict[str, dict[str, Any]]
    path: Path
    elapsed_s: float

    def table(self) -> str:
        names = list(DIMENSIONS)
        lines = [f"tune {self.pipeline} on {Path(self.source).name}: {self.cameras} camera(s), {self.frames} frames "
                 f"per trial, {len(self.trials)} configurations in {self.elapsed_s:.0f} s"]
        lines.append(f"{'#':>3} {'requests':>8} {'streams':>13} {'dec.threads':>11} {'resize':>7} {'fps':>8}   runs")
        for i, t in enumerate(self.trials, 1):
            s = t.settings
            mark = "  <- best" if t is self.best else ("  (defaults)" if t is self.default else "")
            fps = "failed" if t.error else f"{t.score:.1f}"
            lines.append(f"{i:>3} {s[names[0]]:>8} {s[names[1]]:>13} {s[names[2]]:>11} {str(s.get(names[3], '-')):>7} "
                         f"{fps:>8}   {', '.join(f'{x:.1f}' for x in t.fps)}{mark}"
                         + (f"  {t.error}" if t.error else ""))
        gain = self.best.score / self.default.score if self.default.score else 0.0
        lines.append(f"best {self.best.score:.1f} fps vs defaults {self.default.score:.1f} fps ({gain:.2f}x); "
                     f"wrote {self.path}")
        return "\n".join(lines)


def _stage_roles(spec: Any) -> tuple[str, list[str], list[str], dict[str, dict[str, Any]]]:
    """(source stage, inference stages, detect stages with `resize`, their current params)."""
    from pipeline.registry import resolve_stage_type
    from pipeline.stage import InferStage

    source, infer, resize = "", [], []
    params: dict[str, dict[str, Any]] = {}
    for st in spec.stages:
        cls = resolve_stage_type(st.type)
        params[st.name] = dict(st.params)
        if cls.kind == "source" and not source:
            source = st.name
        elif issubclass(cls, InferStage):
            infer.append(st.name)
            if "resize" in cls.Params.model_fields:
                resize.append(st.name)
    return source, infer, resize, params


def to_overrides(settings: dict[str, Any], spec: Any) -> dict[str, dict[str, Any]]:
    """Search settings -> ``{stage: {param: value}}``."""
    source, infer, resize, params = _stage_roles(spec)
    out: dict[str, dict[str, Any]] = {}
    if source and "decoder threads" in settings:
        out[source] = {"threads": int(settings["decoder threads"])}
    hint, _, streams = str(settings.get("streams", "THROUGHPUT")).partition("/")
    for name in infer:
        config = {k: v for k, v in dict(params[name].get("config") or {}).items() if k != "NUM_STREAMS"}
        if streams:
            config["NUM_STREAMS"] = int(streams)
        out[name] = {"requests": int(settings.get("requests", 0)), "hint": hint, "config": config}
    if "resize" in settings:
        for name in resize:
            out[name]["resize"] = settings["resize"]
    return out


def run_tune(name: str, source: str, cameras: int = 1, budget_s: float = 120.0, frames: int | None = None,
             out: str | Path = "overrides.yaml", config: str | Path = "pipelines.yaml", top: int = 3,
             log: Callable[[str], None] | None = None) -> TuneResult:
    from pipeline.config import load_pipeline
    from pipeline.videofile import count_frames

    if budget_s <= 0:
        raise ValueError(f"--budget-s must be > 0, got {budget_s}")
    if cameras < 1:
        raise ValueError(f"--cameras must be >= 1, got {cameras}")
    say = log or (lambda msg: None)
    config = str(Path(config).resolve())
    spec = load_pipeline(config, name)
    _, infer, resize, _ = _stage_roles(spec)
    if not infer:
        raise ValueError(f"pipeline {name!r} has no inference stage to tune")
    dims = {k: v for k, v in DIMENSIONS.items() if k != "resize" or resize}
    from stages.sources.base import is_live_uri

    if is_live_uri(source):
        raise ValueError(f"--source {source}: tune compares trials of the same frames; give it a recording of "
                         "the camera (a video file), not the live stream")
    total = None
    if "://" not in source and Path(source).is_file():
        try:
            total = count_frames(source)[0]
        except ValueError:
            total = None
    n = frames or (min(total, 200) if total else 200)
    if n < 2:
        raise ValueError(f"--frames must be >= 2, got {n}")
    plan = BenchPlan(pipeline=name, config=config, source=str(Path(source).resolve()) if total else source,
                     cameras=cameras, frames=n, loop=bool(total and n > total),
                     out=tempfile.mkdtemp(prefix="vapipe-tune-"), record_frames=0)
    try:
        return _search(name, source, cameras, budget_s, n, Path(out), spec, plan, dims, top, say)
    finally:
        shutil.rmtree(plan.out, ignore_errors=True)


def _search(name: str, source: str, cameras: int, budget_s: float, n: int, path: Path, spec: Any, plan: BenchPlan,
            dims: dict[str, list[Any]], top: int, say: Callable[[str], None]) -> TuneResult:
    from pipeline.overrides import apply_override_file

    t_start = time.monotonic()
    deadline = t_start + budget_s
    trials: dict[tuple[Any, ...], Trial] = {}
    order: list[Trial] = []
    per_trial = [0.0]

    def measure(settings: dict[str, Any]) -> Trial | None:
        trial = Trial(dict(settings))
        hit = trials.get(trial.key())
        if hit is not None:
            trial = hit
        if trials and time.monotonic() + per_trial[0] > deadline:
            return None
        t0 = time.monotonic()
        try:
            res = spawn_worker("vapipe", replace(plan, overrides=to_overrides(settings, spec)))
            trial.fps.append(float(res["fps"]))
        except BenchError as exc:
            trial.error = str(exc)
        trial.seconds += time.monotonic() - t0
        per_trial[0] = max(per_trial[0], time.monotonic() - t0)
        if hit is None:
            trials[trial.key()] = trial
            order.append(trial)
        say(f"  {_describe(settings)}: " + ("failed: " + trial.error if trial.error else f"{trial.fps[-1]:.1f} fps"))
        return trial

    current = {k: v[0] for k, v in dims.items()}
    default = measure(current)
    assert default is not None
    if default.error:
        raise BenchError(f"tune: the default settings fail: {default.error}")
    best = default
    out_of_time = False
    for _pass in range(3):
        changed = False
        for dim, values in dims.items():
            for value in values:
                if value == current[dim]:
                    continue
                trial = measure({**current, dim: value})
                if trial is None:
                    out_of_time = True
                    break
                if not trial.error and trial.score > best.score * (1 + MIN_GAIN):
                    best, current, changed = trial, dict(trial.settings), True
            if out_of_time:
                break
        if out_of_time or not changed:
            break
    # Re-measure the best few (noise): the best median wins.
    ranked = sorted((t for t in order if not t.error), key=lambda t: t.score, reverse=True)[:top]
    for _ in range(2):
        for t in ranked:
            if len(t.fps) < 3 and measure(t.settings) is None:
                break
    best = max((t for t in order if not t.error), key=lambda t: t.score)
    overrides = to_overrides(best.settings, spec)
    header = (f"# vapipe tune {name} --source {source} --cameras {cameras}: {best.score:.1f} fps "
              f"(defaults {default.score:.1f} fps), {n} frames per trial\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(overrides, sort_keys=False, default_flow_style=None))
    apply_override_file(spec, path)  # what we wrote must be accepted by `vapipe run --overrides`
    return TuneResult(pipeline=name, source=source, cameras=cameras, frames=n, trials=order, best=best,
                      default=default, overrides=overrides, path=path, elapsed_s=time.monotonic() - t_start)


def _describe(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())
