"""The ``hand-tuned`` mode: a competent user's code.

Per camera: a PyAV decode thread (frames converted to BGR once), u8 model input with
conversion and normalisation inside the model (``PrePostProcessor``), and an
``AsyncInferQueue`` with the device's optimal number of requests on each model
(THROUGHPUT hint; compiled models shared by the cameras).  Each region model has its
own thread and queue: the detector's callback hands a frame to the first region step,
whose callback hands it on once all its crops are done, and so on down the chain.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

from pipeline.frame import Frame

from .chain import CompiledPart, compile_chain, compile_tuned, outputs, selected
from .measure import Cameras, decoder_thread, write_records
from .plan import BenchPlan
from .recorder import detection_objects

__all__ = ["run_hand_tuned", "KEEP_ALIVE"]

#: Compiled models whose executor threads ran Python callbacks.  Destroying such a model
#: can hang (OpenVINO 2026.4, 1 run in about 10): the destructor joins its stream
#: threads while holding the GIL, and a stream thread can still be waiting for the GIL to
#: finish a callback after ``wait_all()`` returned.  The worker process keeps them until
#: it exits without teardown (:func:`bench.worker.worker_main`).
KEEP_ALIVE: list[Any] = []

#: an item travelling down the chain: (seq, frame, detections, time its frame was ready)
Item = tuple[int, Frame, Any, float]


def _settle(busy: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait until ``busy()`` is false: ``wait_all()`` can return while the last callback
    still waits for the GIL to hand its frame on."""
    deadline = time.monotonic() + timeout_s
    while busy() and time.monotonic() < deadline:
        time.sleep(0.001)


def _optimal_requests(model: CompiledPart) -> int:
    return int(model.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))


class _RegionStep:
    """One region model of one camera: a thread that starts the crops of each frame on
    an ``AsyncInferQueue`` and hands the frame to ``deliver`` once all are done."""

    def __init__(self, model: CompiledPart, jobs: int, deliver: Callable[[Item], None],
                 fail: Callable[[BaseException], None]) -> None:
        self.model, self.jobs, self.deliver, self.fail = model, jobs, deliver, fail
        self.inbox: queue.Queue[Item | None] = queue.Queue(maxsize=16)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import openvino as ov

        ad, part = self.model.part.adapter, self.model.part
        rq = ov.AsyncInferQueue(self.model.compiled, self.jobs)
        lock = threading.Lock()
        left: dict[int, int] = {}

        def on_crop(request: Any, data: Any) -> None:
            i, ctx, item = data
            try:
                ad.apply(item[2], i, ad.decode(outputs(request, self.model.n_outputs), ctx))
                with lock:
                    left[item[0]] -= 1
                    last = left[item[0]] == 0
                if last:
                    self.deliver(item)
                    with lock:
                        del left[item[0]]
            except BaseException as exc:  # noqa: BLE001
                self.fail(exc)

        rq.set_callback(on_crop)
        try:
            while True:
                item = self.inbox.get()
                if item is None:
                    break
                seq, frame, dets, _ = item
                chosen = selected(dets, part)
                if not chosen:
                    self.deliver(item)
                    continue
                with lock:
                    left[seq] = len(chosen)
                for i in chosen:
                    crop, ctx = ad.prepare(frame, dets, i, self.model.input_hw)
                    rq.start_async({0: crop[None]}, (i, ctx, item))
            rq.wait_all()
            _settle(lambda: bool(left))
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc)
        finally:
            self.done.set()


def run_hand_tuned(plan: BenchPlan) -> dict[str, Any]:
    import openvino as ov

    chain, det, regions = compile_chain(plan, compile_tuned)
    KEEP_ALIVE.extend([det.compiled, *(r.compiled for r in regions)])
    det_jobs = _optimal_requests(det)
    reg_jobs = [_optimal_requests(r) for r in regions]
    cams = Cameras(plan.cameras, plan.record_frames)
    fail = cams.fail

    def camera(cam: int) -> None:
        det_ad = det.part.adapter

        def finished(item: Item) -> None:
            seq, _, dets, t0 = item
            cams.done(cam, seq, t0, lambda: detection_objects(dets, seq))

        steps: list[_RegionStep] = []
        for model, jobs in reversed(list(zip(regions, reg_jobs))):  # each step delivers to the next one
            nxt = steps[0].inbox.put if steps else finished
            steps.insert(0, _RegionStep(model, jobs, nxt, fail))
        first = steps[0].inbox.put if steps else finished

        pending = [0]   # detections started and not yet handed on
        lock = threading.Lock()

        def on_detections(request: Any, data: Any) -> None:
            seq, frame, box, t0 = data
            try:
                dets = box.detections_to_source(det_ad.decode(outputs(request, det.n_outputs), det.input_hw),
                                                (frame.width, frame.height))
                first((seq, frame, dets, t0))
            except BaseException as exc:  # noqa: BLE001
                fail(exc)
            finally:
                with lock:
                    pending[0] -= 1

        dq = ov.AsyncInferQueue(det.compiled, det_jobs)
        dq.set_callback(on_detections)
        for step in steps:
            step.thread.start()
        # full-size BGR frames, scaled with OpenCV
        frames, reader = decoder_thread(plan.source, chain.decode_threads, plan.frames, plan.loop,
                                        cams.stop, lambda f: Frame.from_image(f.to_ndarray(format="bgr24")), fail)
        threads = [reader] + [s.thread for s in steps]
        seq = 0
        try:
            while (item := frames.get()) is not None:
                frame, t0 = item
                x, box = det_ad.host_input(frame, det.input_hw)
                with lock:
                    pending[0] += 1
                dq.start_async({0: x[None]}, (seq, frame, box, t0))
                seq += 1
            dq.wait_all()
            _settle(lambda: pending[0] > 0)
        except BaseException as exc:  # noqa: BLE001
            fail(exc)
            while frames.get() is not None:  # let the decoder finish
                pass
        finally:
            for step in steps:  # in chain order: a step ends after the one before it delivered everything
                step.inbox.put(None)
                step.done.wait()
            for t in threads:
                t.join()

    cams.run(camera)
    write_records(plan.out, "hand-tuned", cams.recorder.records)
    res = cams.clock.result()
    res["requests"] = {det.part.stage: det_jobs, **{r.part.stage: j for r, j in zip(regions, reg_jobs)}}
    return res
