"""The thread planner on injected costs: shares follow the measured work, on both kinds of CPU."""

from __future__ import annotations

import itertools
import math

import pytest

from pipeline.planner import DECODER_BUSY_MAX, DECODER_SLACK_THREADS, InferInfo, plan_threads


def _threads(plan, name: str) -> int:
    return plan.infer[name]["INFERENCE_NUM_THREADS"]


def test_the_costlier_model_gets_more_than_an_even_share() -> None:
    infer = [InferInfo("detector", ms=20.0), InferInfo("classifier", ms=4.0)]
    plan = plan_threads(8, 1, infer, decode_ms=2.0, host_ms=0.5)
    even = (8 - 1) / 2  # what the cores left after one decoder give each model when split evenly
    assert _threads(plan, "detector") > even > _threads(plan, "classifier")
    # swapping the costs swaps the shares: the plan follows the measurements, not the stage order
    swapped = plan_threads(8, 1, [InferInfo("detector", ms=4.0), InferInfo("classifier", ms=20.0)],
                           decode_ms=2.0, host_ms=0.5)
    assert _threads(swapped, "classifier") > even > _threads(swapped, "detector")


def test_inference_bound_cpu_gives_inference_both_cores() -> None:
    """AVX2 only, f32: a pose-detector inference costs 18 ms on one thread against 3.6 ms for a
    1080p frame's decode. One inference thread would cap the camera at 55 fps while the second
    core idles; the work fits two cores at 2000 / (3.6 + 0.6 + 18) = 90 fps."""
    plan = plan_threads(2, 1, [InferInfo("person_detect", ms=18.0)], decode_ms=3.6, host_ms=0.6)
    assert plan.infer["person_detect"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert plan.requests["person_detect"] == 3  # both streams busy while the camera prepares the next frame
    assert plan.decoder_threads == 1 and plan.bound == "cpu"
    assert plan.predicted_fps == pytest.approx(2000 / (3.6 + 0.6 + 18), rel=1e-3)


def test_decode_heavy_cpu_keeps_one_inference_thread() -> None:
    """AVX-512 BF16: the same inference costs 3.3 ms, decoding 2.5 ms: one thread carries
    the inference the two cores can feed (2000 / 6.4 = 312 fps needs 0.97 of a core)."""
    plan = plan_threads(2, 1, [InferInfo("person_detect", ms=3.1)], decode_ms=2.5, host_ms=0.8)
    assert plan.infer["person_detect"] == {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1}
    assert plan.requests["person_detect"] == 2


def test_a_model_just_over_a_core_gets_a_second_stream_rather_than_capping_the_rate() -> None:
    """persons, 4 cameras, AMD EPYC Zen 5 (AVX-512 BF16): 3.23 ms per inference, 2.41 ms per
    1080p frame, 0.64 ms host work.  The two cores feed 318 fps, which keeps the detector
    busy 1.03 cores: one thread would cap the run at 1000 / 3.23 = 310 fps."""
    plan = plan_threads(2, 4, [InferInfo("person_detect", ms=3.23)], decode_ms=2.41, host_ms=0.64)
    assert plan.infer["person_detect"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert plan.bound == "cpu"
    assert plan.predicted_fps == pytest.approx(2000 / (2.41 + 0.64 + 3.23), rel=1e-3)


def test_the_work_never_exceeds_the_cores_and_the_prediction_respects_every_limit() -> None:
    costs = (0.3, 2.0, 9.0, 40.0)
    for cores, sources, models in itertools.product((1, 2, 4, 16), (1, 3, 8), (1, 2, 3)):
        for ms in itertools.product(costs, repeat=models):
            infer = [InferInfo(f"m{i}", ms=c, per_frame=1.0 + i) for i, c in enumerate(ms)]
            plan = plan_threads(cores, sources, infer, decode_ms=3.0, host_ms=0.4)
            assert plan.demand <= cores * 1.001, (cores, sources, ms, plan.summary())
            per_cam = plan.predicted_fps / sources
            assert per_cam <= 1000.0 / 3.0 * plan.decoder_threads * 1.0001  # predictions are rounded
            assert per_cam <= 1000.0 / 0.4 * 1.0001
            for info in infer:
                threads = _threads(plan, info.name)
                assert 1 <= threads <= cores
                # every model has the threads its share of the predicted rate needs
                assert sources * per_cam * info.frame_ms / 1000.0 <= threads * 1.0001
                assert plan.requests[info.name] >= max(2, math.ceil(plan.infer[info.name]["NUM_STREAMS"] / sources))


def test_more_costly_inference_never_gets_fewer_threads() -> None:
    previous = 0
    for ms in (0.5, 2, 5, 10, 20, 40, 80):
        plan = plan_threads(16, 2, [InferInfo("d", ms=ms), InferInfo("r", ms=3.0)], decode_ms=4.0, host_ms=0.5)
        assert _threads(plan, "d") >= previous
        previous = _threads(plan, "d")
    assert previous > 8


def test_decoder_threads_rise_only_when_decoding_binds_and_it_pays() -> None:
    cheap_model = [InferInfo("tiny", ms=0.2)]
    plan = plan_threads(8, 1, cheap_model, decode_ms=12.0, host_ms=0.3)  # 4K HEVC and a tiny model
    cpu_bound = 8000 / (12.0 + 0.3 + 0.2)
    assert plan.decoder_threads >= 6 and plan.predicted_fps >= cpu_bound / 1.1  # frame threads until it stops paying
    plan = plan_threads(2, 1, [InferInfo("pose", ms=18.0)], decode_ms=3.6, host_ms=0.6)
    assert plan.decoder_threads == 1
    plan = plan_threads(8, 1, cheap_model, decode_ms=12.0, host_ms=0.3, decoder_threads=1)
    assert plan.decoder_threads == 1 and plan.bound == "decode" and "decode" in plan.user_set


def test_a_decoder_that_would_seldom_idle_gets_a_second_thread_and_a_spare() -> None:
    """faces on a 1080p clip (2 cores): the CPU, not decoding, bounds the rate, but one decoder
    thread would be busy 99 % of the time, so every later stage would wait on its slow frames.
    A decoder that needs frame threads gets one more than it needs (they wait on each other)."""
    faces = [InferInfo("face_detect", ms=0.94), InferInfo("landmarks", ms=1.13, per_frame=2.0, objects=True)]
    plan = plan_threads(2, 1, faces, decode_ms=4.95, host_ms=1.87)
    assert plan.bound == "cpu" and plan.decoder_threads == 2 + DECODER_SLACK_THREADS == 3
    assert "3 thread" in plan.summary()
    assert plan.predicted_fps * 4.95 / 1000 > DECODER_BUSY_MAX  # one thread would be this busy
    # the same on an AMD EPYC Zen 4 (bf16), costs of a fresh cache after one run: one thread would
    # be 0.80 busy, and two ran at 1.07 times its rate (8 paired rounds)
    zen4 = [InferInfo("face_detect", ms=0.70), InferInfo("landmarks", ms=1.23, per_frame=2.0, objects=True)]
    plan = plan_threads(2, 1, zen4, decode_ms=3.90, host_ms=2.66)
    assert plan.decoder_threads == 2 + DECODER_SLACK_THREADS
    assert 0.78 < plan.predicted_fps * 3.90 / 1000 < 0.82
    # persons there, 0.72 busy: a second thread bought nothing (0.99-1.03x), so none is added
    plan = plan_threads(2, 1, [InferInfo("person_detect", ms=6.25)], decode_ms=4.13, host_ms=1.14)
    assert plan.decoder_threads == 1 and 0.7 < plan.predicted_fps * 4.13 / 1000 < DECODER_BUSY_MAX
    plan = plan_threads(2, 1, faces, decode_ms=1.92, host_ms=1.67)  # the same at 720p: 0.57 busy
    assert plan.decoder_threads == 1
    plan = plan_threads(2, 2, faces, decode_ms=4.95, host_ms=1.87)  # no core left for a second one
    assert plan.decoder_threads == 1
    # a camera delivers at its own pace: the decoder is not busy at the predicted rate, and a
    # frame thread would only delay every frame by one
    assert plan_threads(2, 1, faces, decode_ms=4.95, host_ms=1.87, paced=True).decoder_threads == 1


def test_heavy_models_that_hand_frames_to_each_other_get_a_stream_more() -> None:
    """ocr at f32 on a 720p ticker (2 cores): the text detector and the recogniser each keep
    about 0.9 of a core busy.  One stream each idles a core whenever one model waits for the
    other's frame; two each keep both cores busy (4.94 against 5.21 fps measured)."""
    ocr = [InferInfo("text_detect", ms=134.3), InferInfo("direction", ms=0.49, per_frame=13.0, objects=True),
           InferInfo("recognize", ms=11.3, per_frame=13.0, objects=True)]
    plan = plan_threads(2, 1, ocr, decode_ms=1.77, host_ms=17.4)
    demand = {n: m["cores"] for n, m in plan.models.items()}
    assert demand["text_detect"] > 0.85 and demand["recognize"] > 0.85 and demand["direction"] < 0.5
    assert plan.infer["text_detect"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert plan.infer["recognize"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert plan.infer["direction"] == {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1}
    assert plan.requests["text_detect"] == 3 and plan.demand <= 2.001  # more streams, not more work
    # however busy on average: at bf16 (Zen 4) the detector keeps 0.83 of a core busy, and one
    # stream left 6 % of the CPU idle (7.5-7.8 fps at 94 % against 7.9-8.1 at 99 % with two)
    bf16 = [InferInfo("text_detect", ms=90.89), InferInfo("direction", ms=0.42, per_frame=12.33, objects=True),
            InferInfo("recognize", ms=8.68, per_frame=12.33, objects=True)]
    plan = plan_threads(2, 1, bf16, decode_ms=2.14, host_ms=11.39)
    assert 0.5 < plan.models["text_detect"]["cores"] < 0.85
    assert plan.infer["text_detect"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    assert plan.infer["recognize"] == {"NUM_STREAMS": 2, "INFERENCE_NUM_THREADS": 2}
    # a light second model leaves the heavy one at its share (faces: 0.24 and 0.59 of a core) ...
    faces = [InferInfo("face_detect", ms=0.94), InferInfo("landmarks", ms=1.13, per_frame=2.0, objects=True)]
    assert all(c["NUM_STREAMS"] == 1 for c in plan_threads(2, 1, faces, decode_ms=1.92, host_ms=1.67).infer.values())
    # ... and so does one core: there is no other core to take the bursts
    one = plan_threads(1, 1, ocr, decode_ms=1.77, host_ms=17.4)
    assert all(c["NUM_STREAMS"] == 1 for c in one.infer.values())


def test_user_threads_and_requests_are_kept() -> None:
    infer = [InferInfo("a", ms=30.0, user_config=True, user_threads=1, user_streams=1),
             InferInfo("b", ms=5.0, user_requests=True)]
    plan = plan_threads(4, 1, infer, decode_ms=2.0, host_ms=0.5)
    assert plan.infer["a"] == {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1} and "a" in plan.user_set
    assert plan.bound == "a"  # one thread for 30 ms inferences caps the rate at 33 fps
    assert plan.predicted_fps == pytest.approx(1000 / 30, rel=1e-3)
    assert "b" not in plan.requests


def test_latency_hint_region_models_and_other_devices() -> None:
    infer = [InferInfo("lat", ms=40.0, hint="LATENCY"), InferInfo("crops", ms=3.0, per_frame=6.0, objects=True),
             InferInfo("gpu", device="GPU"), InferInfo("auto", device="AUTO:CPU")]
    plan = plan_threads(4, 1, infer, decode_ms=2.0, host_ms=0.5)
    assert plan.infer["lat"]["NUM_STREAMS"] == 1 and plan.infer["lat"]["INFERENCE_NUM_THREADS"] >= 2
    assert "crops" in plan.infer and "crops" not in plan.requests  # region pools grow with the objects
    assert plan.untouched == {"gpu": "GPU", "auto": "AUTO:CPU"}
    assert set(plan.infer) == {"lat", "crops"}


def test_summary_shows_costs_and_shares_one_line_per_runtime() -> None:
    plan = plan_threads(2, 1, [InferInfo("person_detect", ms=18.0, origin="measured")], decode_ms=3.6,
                        host_ms=0.6, decode_origin="cached")
    lines = plan.summary().splitlines()
    assert lines[0].startswith("threads: 2 cores, predicted 90.1 fps (bound: cpu)")
    assert lines[1].strip().startswith("ffmpeg   decode 3.60 ms/frame (cached)")
    assert "person_detect 18.00 ms/inference (measured) x 1.00/frame -> 2 streams x 1 thread" in lines[2]
    assert lines[3].strip().startswith("opencv   1 thread; host 0.60 ms/frame")
    d = plan.as_dict()
    assert d["models"]["person_detect"]["ms"] == 18.0 and d["predicted_fps"] == pytest.approx(90.09, abs=0.01)


def test_cores_zero_is_no_plan() -> None:
    plan = plan_threads(0, 2, [InferInfo("a", ms=5.0)])
    assert not plan.enabled and plan.infer == {} and "runtime defaults" in plan.summary()
