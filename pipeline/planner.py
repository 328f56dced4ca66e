"""The thread plan: how many threads each runtime gets, chosen from measured costs.

Inputs (CPU milliseconds, see :mod:`pipeline.costs`): per source the decode cost
of a frame on one thread; per frame the host work of the camera's worker thread;
per CPU model the cost of one inference on one thread and the inferences per frame
(1 for a detector, 1/N with ``every: N``, objects per frame for a region model).

The rate every camera can keep is the smallest of:

* **CPU**: all cameras' frames together cost ``sum(decode) + cameras * (host +
  sum(inferences per frame * ms per inference))`` CPU-ms, and ``cores`` cores
  give 1000 CPU-ms per second each;
* **decoders**: a decoder with ``t`` frame threads decodes ``1000 * t / decode``
  frames per second;
* **workers**: one Python thread per camera does the host work (and the encoding,
  when an encoder has one thread);
* **models the user configured** (their threads are theirs).

Each CPU model then gets the threads its share of that rate needs,
``ceil(cameras * rate * per_frame * ms / 1000)`` (at least 1, at most ``cores``),
as that many single-threaded streams (``THROUGHPUT``: streams run separate
requests without synchronising threads, so a stream descheduled for a moment
stalls only itself) or one stream of that many threads (``LATENCY``).  Every
camera keeps one request more than its share of the streams, at least 2.  Where two or
more models each keep half a core or more busy, each of them gets a stream more (they
hand frames to each other in bursts).  Decoders
get one thread each; more frame threads only when the decoders bind and the
prediction rises by at least 10 % (each frame thread adds a frame of latency), and
then one more than that (:data:`DECODER_SLACK_THREADS`).
Encoders (MP4 output) encode on the worker thread, or on threads of their own
(as many as their share needs, at least 2) when that raises the rate by 10 %.

The sum of threads may exceed the cores: light stages (a decoder using a third of
a core, a region model seeing few objects) need a thread to run on but not a core
of their own.  What must fit the cores is the work, not the threads; the decoders
additionally yield while they are ahead (:mod:`pipeline.priority`).  The previous
rule ("cores left after one per decoder, split evenly") starved inference on CPUs
where inference costs more than decoding (f32 on AVX2: 18 ms per pose-detector
inference against 3.6 ms per 1080p frame gave inference one of two cores).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .priority import NICE_WHILE_AHEAD

if TYPE_CHECKING:
    from .precision import Precision

__all__ = ["InferInfo", "EncoderInfo", "ThreadPlan", "plan_threads", "ASSUMED_DECODE_MS", "ASSUMED_HOST_MS",
           "ASSUMED_INFER_MS"]

#: costs assumed where nothing was measured (planning without models or sources, e.g. doctor)
ASSUMED_DECODE_MS = 4.0
ASSUMED_HOST_MS = 0.5
ASSUMED_INFER_MS = 10.0
ASSUMED_ENCODE_MS = 8.0
#: a decoder frame thread is added, or encoding moved off the worker, when it raises the
#: predicted rate this much
THREAD_GAIN = 1.10
#: ... or if the decoder threads would otherwise be busier than this at the predicted rate: a
#: decoder that seldom idles makes every later stage wait on its slow frames.  faces on a 1080p
#: clip, 2 cores: one thread predicted 0.99 busy ran at 187 fps and 90 % CPU, two at 198 fps and
#: 96 % (Xeon, AVX-512 BF16); predicted 0.80 busy, two threads ran at 1.07x one (AMD EPYC Zen 4,
#: 8 paired rounds).  Near and below this, a frame thread bought nothing or cost: persons on a
#: 1080p clip, predicted 0.56 and 0.75, 1.01x and 0.99x; faces at 720p, predicted 0.62 and
#: 0.71, 0.92x and 0.95x (same Zen 4)
DECODER_BUSY_MAX = 0.75
#: frame threads a decoder gets beyond those its share of the work needs, once it needs more
#: than one (FFmpeg's own automatic choice is the cores plus one): a frame thread waits on
#: the rows of the frame before it, and with exactly the threads the work needs the decoder
#: then idles its share.  Its frame threads go down and up with it (pipeline/priority.py),
#: so a decoder that is ahead does not take the extra thread's CPU from inference.  faces on
#: a 1080p clip (2 cores, AMD EPYC Zen 5, bf16): 3 threads against 2, 1.048x the rate and 97
#: against 94 % of the cores busy; persons on the same clip, 1.009x (7 interleaved rounds
#: each).  Without lowering the frame threads, persons lost: 0.936x
DECODER_SLACK_THREADS = 1
#: Where two or more CPU models each keep at least HEAVY_MODEL of a core busy, each of them
#: gets one more single-threaded stream than its share (cores permitting): such models hand
#: frames to each other in bursts (a text detector's frame, then its lines to the recogniser),
#: and a model held to its average share idles its core while it waits for the other, however
#: busy that share is on average.  ocr at f32 on a 720p ticker (2-core Xeon, AVX-512 BF16;
#: detector 0.88 and recogniser 0.96 of a core): 4.94 fps at 94-98 % CPU with one stream each,
#: 5.21 fps at 99 % with two (median of 4 alternating runs).  ocr at bf16 (2-core AMD EPYC
#: Zen 4, AVX-512 BF16; detector 0.83 of a core): 7.5-7.8 fps at 94 % CPU with one detector
#: stream, 0.94-0.99 of the runtimes' defaults in all 8 rounds; 7.9-8.1 fps at 99 % with two,
#: 0.99-1.03 of the defaults.  A single model keeps its share: beside decoding, one thread
#: carries 0.97 of a core best (see the tests).
HEAVY_MODEL = 0.5
CV2_THREADS = 1


@dataclass(frozen=True)
class InferInfo:
    """An inference stage as the planner sees it.

    ``ms``: CPU ms of one inference on one thread (None: not measured);
    ``per_frame``: inferences per frame (None: not known, 1 assumed);
    ``origin``: where ``ms`` came from (measured, cached, observed, assumed).
    """

    name: str
    device: str = "CPU"
    hint: str = "THROUGHPUT"
    user_config: bool = False  # the stage's config already sets NUM_STREAMS or INFERENCE_NUM_THREADS
    user_threads: int = 0      # ... and its INFERENCE_NUM_THREADS (0: unknown / plugin's choice)
    user_streams: int = 0
    ms: float | None = None
    per_frame: float | None = None
    origin: str = "assumed"
    user_requests: bool = False  # the stage's requests are set by the user
    objects: bool = False        # per_frame counts objects found by earlier stages (a region model)
    per_object: float = 1.0      # ... times this share of them run per frame (1/N with reclassify: N)
    objects_origin: str = "assumed"  # a region model's objects per frame: assumed, or observed by a run
    engine: str = "openvino"     # or onnxruntime (threads: NUM_STREAMS runner threads, the rest intra-op)
    precision: Precision | None = None  # chosen by measurement (None: the planner did not choose)

    @property
    def on_cpu(self) -> bool:
        return self.device.upper().split(".", 1)[0] == "CPU"

    @property
    def cost_ms(self) -> float:
        return self.ms if self.ms is not None else ASSUMED_INFER_MS

    @property
    def frame_ms(self) -> float:
        """CPU ms of this stage per frame."""
        return self.cost_ms * (self.per_frame if self.per_frame is not None else 1.0)


@dataclass(frozen=True)
class EncoderInfo:
    """A stage that encodes every frame with a thread pool of its own (FFmpeg ``thread_count``):
    ``ms`` is one frame on one thread (None: not measured); ``user_threads`` its threads if the
    user set them."""

    name: str
    ms: float | None = None
    origin: str = "assumed"
    user_threads: int | None = None

    @property
    def cost_ms(self) -> float:
        return self.ms if self.ms is not None else ASSUMED_ENCODE_MS


@dataclass
class ThreadPlan:
    """Threads per runtime for one run, the costs they came from and the rate they predict."""

    cores: int
    sources: int
    decoder_threads: int                       # per source; FFmpeg thread_count (0: FFmpeg's choice)
    cv2_threads: int                           # cv2.setNumThreads
    infer: dict[str, dict[str, int]] = field(default_factory=dict)  # CPU stage -> OpenVINO properties
    precision: dict[str, str] = field(default_factory=dict)          # CPU stage -> INFERENCE_PRECISION_HINT
    requests: dict[str, int] = field(default_factory=dict)           # stage -> requests per camera
    untouched: dict[str, str] = field(default_factory=dict)          # stage -> device left to its plugin
    runtime_threads: int = 1                  # intra-op threads for BLAS, PyTorch, ONNX Runtime
    notes: list[str] = field(default_factory=list)
    user_set: list[str] = field(default_factory=list)  # "decode", stage names: values the user chose
    enabled: bool = True                      # False (cores=0): every runtime keeps its own defaults
    decoder_nice: int = 0                     # decoders' nice value while ahead of inference
    decode_ms: list[float] = field(default_factory=list)   # per source
    decode_origin: str = "assumed"
    host_ms: float = ASSUMED_HOST_MS          # per frame on a camera's worker thread
    host_origin: str = "assumed"              # assumed, measured (input preparation) or observed (a run)
    host_key: str | None = None               # cost-cache key under which a run keeps the host work it saw
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # stage -> ms, per_frame, origin, cores
    predicted_fps: float = 0.0                # all cameras together
    bound: str = ""                           # what limits the predicted rate: cpu, decode, worker or a stage
    infos: list[InferInfo] = field(default_factory=list)  # the inference stages with their costs
    encoders: dict[str, dict[str, Any]] = field(default_factory=dict)  # stage -> threads, ms, origin, cores
    needs_image: bool = False
    user_decoder_threads: int | None = None

    @property
    def infer_threads(self) -> int:
        return sum(c.get("INFERENCE_NUM_THREADS", 0) for c in self.infer.values())

    @property
    def busy_threads(self) -> int:
        """Threads the plan starts for decoding, CPU inference and encoding (they may exceed the
        cores; an encoder of one thread runs on the camera's worker thread)."""
        decoder = self.decoder_threads or self.cores + 1  # 0: FFmpeg's automatic choice, cores + 1
        encoders = sum(e["threads"] for e in self.encoders.values() if e["threads"] > 1)
        return self.sources * (decoder + encoders) + self.infer_threads + max(0, self.cv2_threads - 1)

    @property
    def demand(self) -> float:
        """Cores the predicted rate keeps busy (decode, host, CPU inference and encoding)."""
        per_cam = self.predicted_fps / max(1, self.sources)
        per_frame = self.host_ms + sum(m["frame_ms"] for m in self.models.values()) + \
            sum(e["ms"] for e in self.encoders.values())
        return per_cam * (sum(self.decode_ms) + self.sources * per_frame) / 1000.0

    @property
    def oversubscribed(self) -> bool:
        """Threads the user set exceed the cores: one model's threads, or the decoders' frame
        threads (threads the plan chooses may outnumber the cores, their work never does)."""
        user_models = any(self.infer[n]["INFERENCE_NUM_THREADS"] > self.cores for n in self.user_set
                          if n in self.infer)
        decoder_threads = self.sources * (self.decoder_threads or self.cores + 1)
        user_decoders = "decode" in self.user_set and decoder_threads > self.cores
        return user_models or user_decoders

    @property
    def assumed(self) -> list[str]:
        """What the plan had to assume, not having seen it yet: region models' objects per frame
        and the decode cost of sources that are not probed before they connect."""
        guesses = [f"objects per frame of {n}" for n, m in self.models.items()
                   if m.get("objects_origin") == "assumed"]
        return guesses + (["decode cost"] if "assumed" in self.decode_origin.split("/") else [])

    def summary(self) -> str:
        """One line per runtime: measured costs and the shares they led to."""
        if not self.enabled:
            return "threads: runtime defaults (--cores 0: no plan)"
        mark = {n: " (set)" if n in self.user_set else "" for n in ["decode", *self.infer]}
        per_cam = self.predicted_fps / max(1, self.sources)
        dec = "auto" if self.decoder_threads == 0 else str(self.decoder_threads)
        d_ms = max(self.decode_ms) if self.decode_ms else ASSUMED_DECODE_MS
        dec_cores = per_cam * sum(self.decode_ms) / 1000.0
        lines = [f"threads: {self.cores} cores, predicted {self.predicted_fps:.1f} fps (bound: {self.bound}), "
                 f"work {self.demand:.2f} cores{' OVERSUBSCRIBED' if self.oversubscribed else ''}",
                 f"  ffmpeg   decode {d_ms:.2f} ms/frame ({self.decode_origin}) x {self.sources} source"
                 f"{'s' if self.sources != 1 else ''} -> {dec} thread{mark['decode']} each, {dec_cores:.2f} cores"
                 + (f", nice {self.decoder_nice} while ahead" if self.decoder_nice else "")]
        for name, cfg in self.infer.items():
            m = self.models.get(name, {})
            req = f", {self.requests[name]} requests/camera" if name in self.requests else ""
            streams = max(1, int(cfg.get("NUM_STREAMS", 1)))
            per_stream = max(1, int(cfg.get("INFERENCE_NUM_THREADS", 1)) // streams)
            runtime = "onnxrt  " if self._engine(name) == "onnxruntime" else "openvino"
            at = f" at {m['precision']}" if m.get("precision") else ""
            objects = f" ({m['objects_origin']})" if "objects_origin" in m else ""
            lines.append(f"  {runtime} {name} {m.get('ms', 0):.2f} ms/inference ({m.get('origin', '?')}){at} x "
                         f"{m.get('per_frame', 1):.2f}/frame{objects} -> {streams} stream{'s' if streams != 1 else ''} x "
                         f"{per_stream} thread{mark[name]}{req}, {m.get('cores', 0):.2f} cores")
        if any(self._engine(n) == "onnxruntime" for n in self.infer):
            lines.append(f"  onnxrt   process-wide intra-op pool: {self.ort_intra_threads} thread(s) per inference "
                         "(the caller counts as one), 1 inter-op, no pinning")
        for name, dev in self.untouched.items():
            lines.append(f"  openvino {name} on {dev} (plugin's choice)")
        for name, e in self.encoders.items():
            where = "on the worker thread" if e["threads"] == 1 else f"{e['threads']} threads each"
            lines.append(f"  ffmpeg   {name} {e['ms']:.2f} ms/frame ({e['origin']}) -> {where}"
                         f"{' (set)' if name in self.user_set else ''}, {e['cores']:.2f} cores")
        lines.append(f"  opencv   {self.cv2_threads} thread; host {self.host_ms:.2f} ms/frame ({self.host_origin}) "
                     f"per camera, {self.sources * per_cam * self.host_ms / 1000.0:.2f} cores")
        return "\n".join(lines)

    def _engine(self, name: str) -> str:
        return next((i.engine for i in self.infos if i.name == name), "openvino")

    @property
    def ort_intra_threads(self) -> int:
        """Threads per inference of the ONNX Runtime stages (sizes ORT's process-wide pool)."""
        per_run = [max(1, c["INFERENCE_NUM_THREADS"] // max(1, c["NUM_STREAMS"])) for n, c in self.infer.items()
                   if self._engine(n) == "onnxruntime"]
        return max(per_run or [self.runtime_threads])

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(busy_threads=self.busy_threads, demand=round(self.demand, 3), oversubscribed=self.oversubscribed)
        return d


def plan_threads(cores: int | None = None, sources: int = 1, infer: Iterable[InferInfo] = (),
                 needs_image: bool = False, decoder_threads: int | None = None,
                 decode_ms: Sequence[float] | float | None = None, host_ms: float | None = None,
                 decode_origin: str | None = None, encoders: Iterable[EncoderInfo] = (),
                 host_origin: str | None = None, paced: bool = False) -> ThreadPlan:
    """Share ``cores`` between the decoders of ``sources`` sources and the inference stages ``infer``.

    ``cores=0`` disables the plan (every runtime keeps its defaults); None: the CPU affinity.
    ``decoder_threads`` is the user's choice of decoder threads, if any (0 = FFmpeg's automatic
    choice).  ``decode_ms`` (per source, or one value for all) and ``host_ms`` are CPU ms per
    frame; missing costs are assumed (ASSUMED_*); ``host_origin`` says where ``host_ms`` came
    from.  ``paced``: a source delivers frames at its own pace (a camera or stream), so a decoder
    busy at the predicted rate is not busy at the camera's, and a frame thread would only add a
    frame of latency: decoder threads then rise only where decoding binds the rate.
    ``needs_image`` is recorded in the notes.
    """
    from .threads import _cv2_threads, available_cores

    sources = max(1, int(sources))
    stages = list(infer)
    if cores is not None and int(cores) == 0:
        return ThreadPlan(cores=available_cores(), sources=sources, decoder_threads=decoder_threads or 0,
                          cv2_threads=_cv2_threads(), enabled=False, infos=stages, needs_image=needs_image,
                          user_decoder_threads=decoder_threads)
    cores = max(1, int(cores if cores is not None else available_cores()))
    if decode_ms is None:
        d = [ASSUMED_DECODE_MS] * sources
        decode_origin = "assumed"
    elif isinstance(decode_ms, (int, float)):
        d = [float(decode_ms)] * sources
    else:
        d = [float(x) for x in decode_ms] + [float(decode_ms[-1])] * (sources - len(decode_ms))
        d = d[:sources]
    w = ASSUMED_HOST_MS if host_ms is None else max(0.0, float(host_ms))
    cpu = [s for s in stages if s.on_cpu]
    fixed = [s for s in cpu if s.user_config]
    notes = ["full-size BGR conversion runs on each decoder thread"] if needs_image else []
    user_set = ["decode"] if decoder_threads is not None else []
    t_dec = decoder_threads if decoder_threads is not None else 1

    encs = list(encoders)
    work_ms = sum(d) + sources * (w + sum(e.cost_ms for e in encs) + sum(s.frame_ms for s in cpu))
    limits: dict[str, float] = {"cpu": 1000.0 * cores / work_ms if work_ms > 0 else math.inf}
    for s in fixed:  # the user's threads are theirs; all of them are taken as useful
        capacity = s.user_threads or s.user_streams or 1
        limits[s.name] = 1000.0 * capacity / (sources * max(s.frame_ms, 1e-6))

    def worker_limit(own: dict[str, bool]) -> float:
        """An encoder of one thread encodes on the camera's worker thread; with more, on its own."""
        serial = w + sum(e.cost_ms for e in encs if not own[e.name])
        return 1000.0 / serial if serial > 0 else math.inf

    def rate(dec_threads: int, own: dict[str, bool]) -> tuple[float, str]:
        eff = dec_threads if dec_threads else cores  # FFmpeg's automatic choice uses every core
        lim = {**limits, "decode": 1000.0 * eff / max(max(d), 1e-6), "worker": worker_limit(own)}
        key = min(lim, key=lim.__getitem__)
        return lim[key], key

    own = {e.name: (e.user_threads or 0) > 1 for e in encs}
    r, bound = rate(t_dec, own)
    free = {e.name: own[e.name] or e.user_threads is None for e in encs}
    if bound == "worker" and free != own and rate(t_dec, free)[0] >= r * THREAD_GAIN:
        own = free  # encoding moves off the worker onto encoder threads
        r, bound = rate(t_dec, own)
    while decoder_threads is None and sources * (t_dec + 1) <= cores:
        r2, b2 = rate(t_dec + 1, own)
        busy = 0.0 if paced else r * max(d) / (1000.0 * t_dec)
        if not (bound == "decode" and r2 >= r * THREAD_GAIN) and busy <= DECODER_BUSY_MAX:
            break
        t_dec, r, bound = t_dec + 1, r2, b2
    if decoder_threads is None and t_dec > 1:
        t_dec += DECODER_SLACK_THREADS  # the rate predicted stays that of the threads it needs

    plan = ThreadPlan(cores=cores, sources=sources, decoder_threads=t_dec, cv2_threads=CV2_THREADS,
                      notes=notes, user_set=user_set, decoder_nice=NICE_WHILE_AHEAD, decode_ms=d,
                      decode_origin=decode_origin or "measured", host_ms=w,
                      host_origin=host_origin or ("assumed" if host_ms is None else "measured"), infos=stages,
                      needs_image=needs_image, user_decoder_threads=decoder_threads)
    predicted = r
    heavy = [st for st in cpu if not st.user_config and sources * r * st.frame_ms / 1000.0 >= HEAVY_MODEL]
    for st in stages:
        if not st.on_cpu:
            plan.untouched[st.name] = st.device
            continue
        demand = sources * r * st.frame_ms / 1000.0  # cores this stage keeps busy at rate r
        if st.user_config:
            threads, streams = max(1, st.user_threads), st.user_streams or 1
            user_set.append(st.name)
        else:
            threads = min(cores, max(1, math.ceil(demand)))
            if len(heavy) > 1 and st in heavy and st.hint != "LATENCY":
                threads = min(cores, threads + 1)  # bursts: see HEAVY_MODEL
            streams = 1 if st.hint == "LATENCY" else threads
            predicted = min(predicted, 1000.0 * threads / (sources * max(st.frame_ms, 1e-6)))
            if not st.objects and not st.user_requests:  # region models size their pools to the objects
                plan.requests[st.name] = max(2, math.ceil(streams / sources) + 1)
        plan.infer[st.name] = {"NUM_STREAMS": streams, "INFERENCE_NUM_THREADS": threads}
        plan.models[st.name] = {"ms": round(st.cost_ms, 3), "per_frame": round(st.per_frame or 1.0, 3),
                                "origin": st.origin if st.ms is not None else "assumed",
                                "frame_ms": st.frame_ms, "cores": round(demand, 3)}
        if st.objects:
            plan.models[st.name]["objects_origin"] = st.objects_origin
        if st.precision is not None:
            plan.models[st.name]["precision"] = st.precision.describe()
            if st.precision.hint:
                plan.precision[st.name] = st.precision.hint
    if predicted < r * 0.999:
        bound = min((n for n in plan.models if n not in user_set),
                    key=lambda n: plan.infer[n]["INFERENCE_NUM_THREADS"] / max(plan.models[n]["frame_ms"], 1e-9),
                    default=bound)
    for e in encs:
        demand = sources * r * e.cost_ms / 1000.0
        if e.user_threads is not None:
            threads = max(1, e.user_threads)
            user_set.append(e.name)
        else:
            threads = min(cores, max(2, math.ceil(demand))) if own[e.name] else 1
        plan.encoders[e.name] = {"threads": threads, "ms": round(e.cost_ms, 3),
                                 "origin": e.origin if e.ms is not None else "assumed", "cores": round(demand, 3)}
    plan.predicted_fps = round(predicted * sources, 2)
    plan.bound = bound
    plan.runtime_threads = max([c["INFERENCE_NUM_THREADS"] for c in plan.infer.values()] or [1])
    return plan
