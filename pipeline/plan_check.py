"""Checks a running pipeline against its thread plan and re-plans from what it observes.

Every second (after a warm-up) the check reads, over the run so far:

* the process's CPU use, as a share of the cores given to the run;
* per camera, the share of time its decoder waited on a full frame queue (the stages
  after it are behind) and its worker waited on an empty one (decoding is behind);
* the CPU time of every camera's reader, decoder and worker thread
  (``/proc/self/task``), and of FFmpeg's frame-decoding threads (``av:<codec>:df<n>``,
  shared out between the cameras by the frames each decoded), hence the observed
  decode and host cost per frame; the rest of the process's CPU time is inference,
  split between the models by their planned shares, and the inferences each model ran
  per frame (region models: objects).

From those costs it makes the plan again (:func:`pipeline.planner.plan_threads`).  When
the cores are under-used (< ``UNDERUSED`` of them) while one side waits on the other
most of the time (``WAITING``) and the new plan differs, the check says so in the run
summary and, with ``replan=True`` (``--replan``) or when the plan had to assume something it
had not seen yet (:attr:`pipeline.planner.ThreadPlan.assumed`: a region model's objects per
frame, a camera's decode cost), applies the new plan once: every
camera's inference stages take the new compile properties and requests before their
next frame (:meth:`pipeline.stage.InferStage.reconfigure`; frames in flight finish on
the old compiled model, in order).  Decoder threads change only on the next start.

A run too short for a window (under ``WARMUP_S + MIN_WINDOW_S``) is not judged; its costs
are observed over all of it at the end (:meth:`PlanCheck.finish`; camera threads count with
the CPU time they had when they ended).

At the end the observed host work per frame, objects per frame of region models and the
decode cost of live sources go into the cost cache for the next start (from a run too
short to judge, only where nothing observed is kept yet); a file's decode cost there is
lowered where the run saw it cost less.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from .costs import CostCache, check_key, decode_key, objects_key
from .planner import ThreadPlan, plan_threads
from .run_counters import CameraView, Snapshot, take_snapshot

__all__ = ["PlanCheck", "UNDERUSED", "WAITING", "LOWERS_DECODE_COST"]

log = logging.getLogger("vapipe.plan")

#: the cores count as under-used below this share
UNDERUSED = 0.9
#: one side of a frame queue "waits on the other" for at least this share of the time
WAITING = 0.5
#: a file's decode cost that a run observes below this share of the cached one replaces it:
#: running beside other work only adds CPU time to a frame, so the lower cost is the closer one,
#: and a measurement taken while the machine was busy would otherwise stay too high for good
#: (a 1080p frame cached at 6.17 ms, measured again at 4.2-4.6 ms; AMD EPYC Zen 4)
LOWERS_DECODE_COST = 0.95
WARMUP_S = 2.0
MIN_WINDOW_S = 2.0
SAMPLE_EVERY_S = 1.0


class PlanCheck:
    """Watches ``cameras`` (the runtime's :class:`pipeline.camera.Camera` objects, read through
    :class:`pipeline.run_counters.CameraView`) run under ``plan``; call :meth:`sample` often (it
    acts at most once a second)."""

    def __init__(self, plan: ThreadPlan, cameras: list[Any], *, pipeline: str, uris: list[str],
                 replan: bool = False, cache: CostCache | None = None, warmup_s: float | None = None) -> None:
        self.plan = plan
        self.infos = {i.name: i for i in plan.infos}
        self.cameras = [CameraView(c) for c in cameras]
        self.pipeline = pipeline
        self.uris = uris
        self.needs_image = plan.needs_image
        self.user_decoder_threads = plan.user_decoder_threads
        self.replan = replan
        self.cache = cache
        self.warmup_s = WARMUP_S if warmup_s is None else warmup_s
        self.started = time.monotonic()
        self._base: Snapshot | None = None
        self._previous: Snapshot | None = None
        self._last = 0.0
        self.replanned: dict[str, Any] | None = None
        self.result: dict[str, Any] = {"status": "not checked (run shorter than the warm-up)" if plan.enabled
                                       else "not checked (no plan: --cores 0)"}
        self.observed: dict[str, Any] = {}
        self._start = self.snapshot() if plan.enabled else None
        self.judged = False  # the costs were observed over a window after the warm-up
        self.decode_exact = False  # each camera's decode cost is its own (no frame threads shared out)

    def snapshot(self, previous: Snapshot | None = None) -> Snapshot:
        """The counters of the watched cameras now (see :func:`pipeline.run_counters.take_snapshot`)."""
        return take_snapshot(self.cameras, previous)

    def sample(self) -> None:
        if not self.plan.enabled:
            return
        now = time.monotonic()
        if now - self.started < self.warmup_s or now - self._last < SAMPLE_EVERY_S:
            return
        self._last = now
        self._previous = self.snapshot(self._previous)
        if self._base is None:
            self._base = self._previous
            return
        if now - self._base.wall < MIN_WINDOW_S:
            return
        self.evaluate(self._base, self._previous)

    def finish(self) -> None:
        """At the end of a run too short for a check (under the warm-up and one window): the
        costs observed over the whole run, not judged (start-up and the drain at the end weigh
        too much in so short a run), so that the summary shows them and :meth:`store` keeps them."""
        if self._start is None or self.observed:
            return
        self.evaluate(self._start, self.snapshot(self._previous), judge=False)

    def evaluate(self, base: Snapshot, snap: Snapshot, judge: bool = True) -> None:
        """Judge the plan on what happened between ``base`` and ``snap`` (sets :attr:`result`,
        and re-plans when told to and the plan does not fit); ``judge=False``: only the costs
        observed."""
        wall = snap.wall - base.wall
        cpu = snap.cpu - base.cpu
        util = cpu / wall / max(1, self.plan.cores)
        others = None
        if snap.machine is not None and base.machine is not None:
            others = max(0.0, (snap.machine - base.machine - cpu) / wall)  # cores other processes used
        decoded = processed = 0
        def used(tids: Any) -> float:  # CPU seconds in the window (a thread new since the base: all of it)
            return sum(snap.threads[t] - base.threads.get(t, 0.0) for t in tids if t in snap.threads)

        python_cpu = used(snap.threads)  # the camera threads, this one and FFmpeg's decoding threads
        codec_cpu = used(snap.codec)
        self.decode_exact = len(self.cameras) == 1 or codec_cpu == 0.0
        all_decoded = sum(n["decoded"] - t["decoded"] for n, t in zip(snap.cams, base.cams))
        decode_ms: list[float] = []
        host_cpu = 0.0
        behind = starving = 0.0
        inferences: dict[str, int] = {}
        for cam, now_c, then_c in zip(self.cameras, snap.cams, base.cams):
            d_dec = now_c["decoded"] - then_c["decoded"]
            d_out = now_c["processed"] - then_c["processed"]
            decoded += d_dec
            processed += d_out
            readers = cam.thread_ids("read", "decode")
            alive = all(t in snap.threads for t in readers)
            codec_share = codec_cpu * d_dec / all_decoded if all_decoded else 0.0
            decode_ms.append(1000.0 * (used(readers) + codec_share) / d_dec if d_dec and alive else float("nan"))
            host_cpu += used(cam.thread_ids("work"))
            behind = max(behind, (now_c["put_wait_s"] - then_c["put_wait_s"]) / wall)
            if not cam.paced:
                starving = max(starving, (now_c["get_wait_s"] - then_c["get_wait_s"]) / wall)
            for name, n in now_c["inferences"].items():
                inferences[name] = inferences.get(name, 0) + n - then_c["inferences"].get(name, 0)
        if processed < 10:
            return
        infer_cpu = max(0.0, cpu - python_cpu)
        planned = {n: m for n, m in self.plan.models.items() if n in inferences}
        expected = sum(inferences[n] * planned[n]["ms"] for n in planned) / 1000.0
        scale = infer_cpu / expected if expected > 0 else 1.0
        per_frame = {n: inferences[n] / processed for n in planned}
        valid_decode = [x for x in decode_ms if x == x]  # not NaN
        self.observed = {
            "window_s": round(wall, 2), "cpu_util": round(util, 3), "fps": round(processed / wall, 2),
            "decode_ms": [round(x, 3) if x == x else None for x in decode_ms],  # None: not measurable
            "host_ms": round(1000.0 * host_cpu / processed, 3),
            "infer_ms": {n: round(planned[n]["ms"] * scale, 3) for n in planned},
            "per_frame": {n: round(v, 3) for n, v in per_frame.items()},
            "decoder_waits_full": round(behind, 3), "worker_waits_empty": round(starving, 3),
            "other_processes_cores": None if others is None else round(others, 2),
        }
        if not judge:
            self.result = {"status": f"not judged (a run of {wall:.1f} s); costs observed over all of it",
                           "observed": self.observed, "predicted_fps": self.plan.predicted_fps, "replan": None}
            return
        self.judged = True
        candidate = self._candidate(valid_decode, host_cpu, processed, scale, per_frame)
        verdict = self._verdict(util, behind, starving, candidate, others)
        self.result = {"status": verdict, "observed": self.observed,
                       "predicted_fps": self.plan.predicted_fps,
                       "replan": _shares(candidate) if candidate is not None else None}
        if self.replanned is not None:
            self.result["replanned"] = self.replanned
        elif self._applies and candidate is not None and verdict.startswith("plan does not fit"):
            self._apply(candidate)
            self.result["status"] += "; re-planned"

    @property
    def _applies(self) -> bool:
        """Whether a plan that does not fit is replaced: asked to (``--replan``), or the plan rests
        on something it had to assume."""
        return self.replan or bool(self.plan.assumed)

    def _candidate(self, decode_ms: list[float], host_cpu: float, processed: int, scale: float,
                   per_frame: dict[str, float]) -> ThreadPlan:
        infos = []
        for info in self.infos.values():
            m = self.plan.models.get(info.name)
            if m is not None and info.name in per_frame:
                info = replace(info, ms=m["ms"] * scale, per_frame=per_frame[info.name] or 1e-6,
                               origin="observed", objects_origin="observed")
            infos.append(info)
        plan = plan_threads(self.plan.cores, self.plan.sources, infos, self.needs_image, self.user_decoder_threads,
                            decode_ms=decode_ms or None, host_ms=1000.0 * host_cpu / processed,
                            decode_origin="observed", host_origin="observed",
                            paced=any(c.paced for c in self.cameras))
        # the same run: its host work is kept where the first plan said, and its encoders keep
        # their threads until the next start (their work is counted in the observed host's)
        return replace(plan, host_key=self.plan.host_key, encoders=self.plan.encoders)

    def _verdict(self, util: float, behind: float, starving: float, candidate: ThreadPlan,
                 others: float | None) -> str:
        if util >= UNDERUSED:
            return f"ok: {util:.0%} of {self.plan.cores} cores busy"
        if others is not None and util + others / max(1, self.plan.cores) >= UNDERUSED and others >= 0.2:
            return (f"machine busy: this run used {util:.0%} of {self.plan.cores} cores and other processes "
                    f"{others:.1f} cores; the plan is not judged")
        differs = _shares(candidate) != _shares(self.plan)
        if behind >= WAITING:
            what = f"decoders waited for the stages after them {behind:.0%} of the time"
        elif starving >= WAITING:
            what = f"workers waited for decoded frames {starving:.0%} of the time"
        else:
            return f"ok: {util:.0%} of {self.plan.cores} cores busy, no stage waiting on another (paced or idle)"
        if not differs:
            return f"ok: {util:.0%} of {self.plan.cores} cores busy; {what}; the observed costs give the same plan"
        hint = "" if self._applies or self.replanned is not None else "; run with --replan to apply it"
        return f"plan does not fit: {util:.0%} of {self.plan.cores} cores busy while {what}; " \
               f"observed costs give {_describe(candidate)}{hint}"

    def _apply(self, candidate: ThreadPlan) -> None:
        changed: dict[str, Any] = {}
        for name, cfg in candidate.infer.items():
            requests = candidate.requests.get(name)
            if name in candidate.user_set or (cfg == self.plan.infer.get(name)
                                              and requests == self.plan.requests.get(name)):
                continue
            for cam in self.cameras:
                stage = cam.camera.stages.get(name)
                if stage is None or not hasattr(stage, "reconfigure"):
                    continue
                update: dict[str, Any] = {"config": {**dict(getattr(stage.params, "config", {}) or {}), **cfg}}
                if requests is not None:
                    update["requests"] = requests
                stage.reconfigure(update)
                changed[name] = {**cfg, **({"requests": requests} if requests is not None else {})}
        assumed = self.plan.assumed
        self.replanned = {"at_s": round(time.monotonic() - self.started, 2), "stages": changed,
                          "assumed": assumed}
        why = f" (the plan assumed {', '.join(assumed)})" if assumed else ""
        log.info("re-planned after %.1f s from observed costs%s: %s", time.monotonic() - self.started,
                 why, _describe(candidate))
        self.plan = replace(candidate, notes=[*candidate.notes, "re-planned from observed costs"])
        self._base = None  # judge the new plan on a fresh window

    def store(self) -> None:
        """Keep what the run observed for the next start: region models' objects per frame,
        live sources' decode cost and the host work per frame (without encoding on the worker
        thread, which the plan counts on its own).  What a run too short to judge observed
        (start-up included) is kept only where nothing observed is kept yet.  A file's cached
        decode cost is lowered to what the run observed where that is lower (below
        ``LOWERS_DECODE_COST`` of it), judged or not, and never raised."""
        if self.cache is None or not self.observed:
            return
        cache, steady = self.cache, self.judged

        def keep(key: str, value: Any) -> None:
            if steady or cache.get(key) is None:
                cache.put(key, value)

        host_at = self.plan.host_key
        if host_at and self.observed.get("host_ms") is not None:
            on_worker = sum(e["ms"] for e in self.plan.encoders.values() if e["threads"] == 1)
            keep(host_at, round(max(0.0, self.observed["host_ms"] - on_worker), 4))
        cache.put(check_key(self.pipeline), {"status": self.result.get("status"), "observed": self.observed,
                                             "replanned": self.replanned, "at": time.time()})
        for name, value in self.observed.get("per_frame", {}).items():
            info = self.infos.get(name)
            if info is not None and info.objects:  # objects per frame: inferences / the share run
                keep(objects_key(self.pipeline, name), round(value / max(info.per_object, 1e-6), 3))
        for cam, uri, ms in zip(self.cameras, self.uris, self.observed.get("decode_ms", [])):
            if ms is None:
                continue
            key = decode_key(uri, self.needs_image)
            if not cam.can_probe:
                keep(key, {"ms": round(ms, 4), "origin": "observed"})
                continue
            entry = cache.get(key)
            if self.decode_exact and isinstance(entry, dict) and "ms" in entry \
                    and ms < LOWERS_DECODE_COST * float(entry["ms"]):
                cache.put(key, {**entry, "ms": round(ms, 4)})

    def summary_lines(self) -> list[str]:
        lines = [f"plan check: {self.result.get('status')}"]
        obs = self.observed
        if obs:
            models = ", ".join(f"{n} {obs['infer_ms'][n]:.2f} ms x {obs['per_frame'][n]:.2f}/frame"
                               for n in obs.get("infer_ms", {}))
            dec = ", ".join("?" if x is None else f"{x:.2f}" for x in obs.get("decode_ms", []))
            lines.append(f"  observed: decode {dec} ms/frame, host {obs['host_ms']:.2f} ms/frame, {models}; "
                         f"decoders waited {obs['decoder_waits_full']:.0%}, workers waited "
                         f"{obs['worker_waits_empty']:.0%} of the time")
        if self.replanned:
            assumed = self.replanned.get("assumed")
            why = f" (the plan assumed {', '.join(assumed)})" if assumed else ""
            changed = self.replanned["stages"] or "no stage changes mid-run (decoder threads change on the next start)"
            lines.append(f"  re-planned at {self.replanned['at_s']} s{why}: {changed}")
        return lines


def _shares(plan: ThreadPlan) -> dict[str, Any]:
    return {"decoder_threads": plan.decoder_threads, "infer": {n: dict(c) for n, c in plan.infer.items()},
            "requests": dict(plan.requests)}


def _describe(plan: ThreadPlan) -> str:
    parts = [f"{n} {c['NUM_STREAMS']} stream(s) x {c['INFERENCE_NUM_THREADS'] // max(1, c['NUM_STREAMS'])} "
             f"thread(s)" for n, c in plan.infer.items()]
    return (f"decode {plan.decoder_threads} thread(s), " + ", ".join(parts)
            + f" ({plan.predicted_fps:.0f} fps predicted)")
