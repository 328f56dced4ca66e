"""Accuracy control of ``vapipe quantize`` on a small synthetic network quantised by NNCF:
layers go back to f32 exactly (quantisers removed, original biases back), and the search
keeps INT8 the least harmful layers that still keep the target share of the f32 boxes."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pytest

from pipeline.quantize_control import Boxes, QuantizedLayers, control

nncf = pytest.importorskip("nncf")
ov = pytest.importorskip("openvino")


def _network() -> Any:
    """3x3 conv (3 -> 8) -> 1x1 conv (8 -> 16) -> 1x1 conv (16 -> 4), biases and ReLUs, 32x32 input."""
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    x = ops.parameter([1, 3, 32, 32], ov.Type.f32, name="image")
    y = x.output(0)
    for i, (cin, cout, k) in enumerate(((3, 8, 3), (8, 16, 1), (16, 4, 1))):
        w = ops.constant(rng.normal(0, 0.5, (cout, cin, k, k)).astype(np.float32))
        conv = ops.convolution(y, w, [1, 1], [k // 2] * 2, [k // 2] * 2, [1, 1])
        conv.set_friendly_name(f"conv{i}")
        y = ops.add(conv, ops.constant(rng.normal(0, 0.3, (1, cout, 1, 1)).astype(np.float32))).output(0)
        if i < 2:
            y = ops.relu(y).output(0)
    return ov.Model([ops.result(y)], [x], "three_convs")


@pytest.fixture(scope="module")
def quantized() -> tuple[Any, Any, list[np.ndarray]]:
    rng = np.random.default_rng(1)
    data = [rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32) for _ in range(16)]
    raw = _network()
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters

    q = nncf.quantize(raw, nncf.Dataset(data), subset_size=len(data), preset=nncf.QuantizationPreset.PERFORMANCE,
                      advanced_parameters=AdvancedQuantizationParameters(backend_params={"compress_weights": False}))
    return raw, q, data


def _outputs(model: Any, data: list[np.ndarray]) -> np.ndarray:
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return np.stack([compiled(x)[0] for x in data])


def _int8_layers(model: Any) -> set[str]:
    """Convolutions with a FakeQuantize node on their weights."""
    return {op.get_friendly_name() for op in model.get_ordered_ops() if op.get_type_name() == "Convolution"
            and op.input_value(1).get_node().get_type_name() == "FakeQuantize"}


def test_layers_go_back_to_f32_exactly(quantized: tuple[Any, Any, list[np.ndarray]]) -> None:
    raw, q, data = quantized
    layers = QuantizedLayers(raw, q)
    assert [layer.name for layer in layers.layers] == ["conv0", "conv1", "conv2"]
    assert [layer.macs for layer in layers.layers] == [32 * 32 * 8 * 27, 32 * 32 * 16 * 8, 32 * 32 * 4 * 16]
    # NNCF corrected the biases of the quantised layers: the f32 copy must get the originals back
    f32, int8 = _outputs(raw, data), _outputs(q, data)
    assert np.array_equal(_outputs(layers.variant([]), data), f32)
    assert not any(op.get_type_name() == "FakeQuantize" for op in layers.variant([]).get_ordered_ops())
    assert np.array_equal(_outputs(layers.variant(["conv0", "conv1", "conv2"]), data), int8)
    one = layers.variant(["conv1"])
    assert _int8_layers(one) == {"conv1"}
    assert not np.array_equal(_outputs(one, data), f32) and not np.array_equal(_outputs(one, data), int8)
    assert _int8_layers(q) == {"conv0", "conv1", "conv2"}      # the quantised model itself is untouched


def _runner(harmful: dict[str, int], reference: list[Boxes]) -> Any:
    """Boxes as if each INT8 layer in ``harmful`` moved the box of its first N frames away."""

    def run_model(model: Any) -> Any:
        int8 = _int8_layers(model)
        lost = max([n for name, n in harmful.items() if name in int8], default=0)

        def run(indices: Iterable[int]) -> list[Boxes]:
            return [(reference[i][0] + (50.0 if i < lost else 0.0), reference[i][1]) for i in indices]
        return run
    return run_model


def test_search_keeps_the_harmless_layers_int8(quantized: tuple[Any, Any, list[np.ndarray]]) -> None:
    raw, q, _ = quantized
    reference = [(np.array([[0.0, 0.0, 10.0, 10.0]]), np.array([0.9])) for _ in range(40)]
    layers = QuantizedLayers(raw, q)
    # conv1 alone loses half the boxes: it goes back to f32, the other two stay INT8
    model, decided = control(layers, _runner({"conv1": 20}, reference), reference, target=0.975, min_iou=0.8)
    assert decided.int8 == ["conv0", "conv2"] and decided.f32 == ["conv1"]
    assert decided.kept == 1.0 and _int8_layers(model) == {"conv0", "conv2"}
    assert decided.int8_macs == pytest.approx((8 * 27 + 4 * 16) / (8 * 27 + 16 * 8 + 4 * 16))
    # one lost box of 40 is within a 2.5-point drop: the quantised model is kept as it is
    model, decided = control(layers, _runner({"conv1": 1}, reference), reference, target=0.975, min_iou=0.8)
    assert decided.f32 == [] and model is q and decided.kept == pytest.approx(39 / 40)
    # every layer loses boxes on its own: no INT8 model keeps the target
    with pytest.raises(ValueError, match="no layer can be INT8"):
        control(layers, _runner({"conv0": 5, "conv1": 5, "conv2": 5}, reference), reference, 0.975, 0.8)
