"""Request pools: results in order, equal to plain OpenVINO inference, inputs copied."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.engine import get_engine
from pipeline.models import resolve_model
from stages.models.face_landmarks import FaceLandmarks
from tests.fresh_process import finishes_without_deadlock

MODEL = "mediapipe/face_landmark"


@pytest.fixture(scope="module")
def model():
    try:
        path = resolve_model(MODEL)
    except Exception as exc:  # noqa: BLE001 - no models on this machine
        pytest.skip(f"model {MODEL} unavailable: {exc}")
    return get_engine().load(path, FaceLandmarks.input_spec)


def _reference(model, image: np.ndarray) -> list[np.ndarray]:
    """The same image through a fresh request, outputs copied."""
    request = model.compiled.create_infer_request()
    request.infer({0: image[None]})
    return [request.get_output_tensor(i).data.copy() for i in range(len(model.output_names))]


def test_pool_matches_plain_inference_and_copies_inputs(model) -> None:
    """More jobs than requests (each request reused): every result equals a fresh
    request's on the same image, although the caller overwrites its image array
    right after ``start`` (a static-shape input is copied into the request)."""
    h, w = model.input_hw
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(5)]
    pool = model.create_pool(2)
    scratch = np.empty_like(images[0])
    jobs = []
    for img in images:
        scratch[...] = img
        jobs.append(pool.start(scratch, lambda outs: [o.copy() for o in outs]))
        scratch[...] = 0  # the caller reuses its buffer at once
    results = [pool.finish(j) for j in jobs]
    for img, got in zip(images, results):
        want = _reference(model, img)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # different images give different outputs (the views are not stale)
    assert not np.allclose(results[0][0], results[1][0])


_RACE = """
import sys, threading, numpy as np, openvino as ov
sys.setswitchinterval(1e-5)  # hand the GIL over as often as possible
from pipeline.engine import get_engine
from pipeline.models import resolve_model
from stages.models.face_landmarks import FaceLandmarks
model = get_engine().load(resolve_model({model!r}), FaceLandmarks.input_spec)
go = threading.Barrier(4)
def camera():
    go.wait()
    pool = model.create_pool(2)
    pool.run(np.zeros((*model.input_hw, 3), np.uint8), lambda outs: [o.copy() for o in outs])
threads = [threading.Thread(target=camera) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("ok")
"""


@pytest.mark.parametrize("attempt", range(5))
def test_pools_created_by_several_cameras_at_once(model, attempt: int) -> None:
    """Four camera threads create pools and read outputs for the first time at the same
    moment, in a fresh process: pybind11 sets up its numpy bridge on first use, and two
    threads racing into that set-up deadlocked (the engine now does it once, up front)."""
    finishes_without_deadlock(_RACE.format(model=MODEL), "camera threads creating request pools")
