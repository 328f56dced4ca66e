"""Scaling on the host like the resize vapipe compiles into a model
(``pipeline.model_prep.with_preprocessing``): equal bit for bit where ``opencv_matches_engine``
says so, checked against OpenVINO itself on random pixels; refused elsewhere."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from pipeline.engine import InputSpec
from pipeline.model_prep import with_preprocessing
from pipeline.resize_match import opencv_matches_engine, resize_like_engine


def _engine_resize(image: np.ndarray, out_wh: tuple[int, int]) -> np.ndarray:
    """``image`` (H, W, 3) uint8 scaled to ``out_wh`` by a compiled model that does nothing else."""
    import openvino as ov
    import openvino.opset13 as ops

    ow, oh = out_wh
    param = ops.parameter([1, 3, oh, ow], np.float32)
    model = ov.Model([ops.multiply(param, np.float32(1.0))], [param])
    spec = InputSpec(host_color="BGR", model_color="BGR", resize_from=image.shape[:2])
    model = with_preprocessing(model, spec, "NCHW", (oh, ow))
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    out = compiled.create_infer_request().infer({0: image[None]})[0]
    return out[0].transpose(1, 2, 0)


def _random(src_wh: tuple[int, int], seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (src_wh[1], src_wh[0], 3), dtype=np.uint8)


@pytest.mark.parametrize("src_wh, out_wh", [
    ((1920, 1080), (640, 360)),     # 3x: the usual camera into a 640 letterbox
    ((3200, 1800), (640, 360)),     # 5x
    ((1920, 1080), (384, 216)),     # 5x
    ((1920, 1440), (640, 480)),     # 3x
    ((1920, 1800), (640, 360)),     # 3x and 5x
    ((1920, 1080), (1920, 360)),    # 1x and 3x
    ((640, 360), (640, 360)),       # 1x
    ((1280, 720), (640, 360)),      # 2x: ties rounded to even
    ((1280, 1280), (640, 640)),     # 2x
])
def test_host_pixels_equal_the_engine_where_the_rule_allows(src_wh: tuple[int, int], out_wh: tuple[int, int]) -> None:
    assert opencv_matches_engine(src_wh, out_wh)
    image = _random(src_wh)
    assert np.array_equal(resize_like_engine(image, out_wh).astype(np.float32), _engine_resize(image, out_wh))


@pytest.mark.parametrize("src_wh, out_wh", [
    ((1920, 720), (640, 360)),      # 3x and 2x
    ((3840, 2160), (640, 360)),     # 6x
    ((2560, 1440), (640, 360)),     # 4x
    ((768, 432), (640, 360)),       # 1.2x
    ((1920, 1080), (544, 320)),     # not whole
])
def test_other_sizes_are_refused_and_do_differ(src_wh: tuple[int, int], out_wh: tuple[int, int]) -> None:
    assert not opencv_matches_engine(src_wh, out_wh)
    image = _random(src_wh)
    with pytest.raises(ValueError, match="odd whole factors"):
        resize_like_engine(image, out_wh)
    # the rule is not merely cautious: OpenCV's bilinear resize differs here
    ours = cv2.resize(image, out_wh, interpolation=cv2.INTER_LINEAR).astype(np.float32)
    assert float(np.mean(ours != _engine_resize(image, out_wh))) > 0.01


def test_plain_opencv_rounds_the_ties_of_a_2x_shrink_differently() -> None:
    """Why a factor of 2 needs more than cv2.resize: about one pixel in eight is a tie."""
    image = _random((1280, 720), seed=11)
    engine = _engine_resize(image, (640, 360))
    for flag in (cv2.INTER_LINEAR, cv2.INTER_AREA):
        assert 0.05 < float(np.mean(cv2.resize(image, (640, 360), interpolation=flag) != engine)) < 0.2
