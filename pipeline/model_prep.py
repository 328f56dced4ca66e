"""What vapipe adds to an OpenVINO model before compiling it, and reads from it: the
preprocessing that runs inside the compiled model (:func:`with_preprocessing`) and the ONNX
``metadata_props`` (:func:`onnx_metadata`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import InputSpec

__all__ = ["with_preprocessing", "onnx_metadata"]


def with_preprocessing(model: Any, spec: InputSpec, layout: str, input_hw: tuple[int, int]) -> Any:
    """``model`` with uint8 NHWC input in ``spec.host_color`` and everything else inside it
    (optional resize and padding, float conversion, colour order, mean and scale)."""
    import openvino as ov
    from openvino.preprocess import ColorFormat, PrePostProcessor

    h, w = input_hw
    ppp = PrePostProcessor(model)
    ti = ppp.input()
    colors = {"BGR": ColorFormat.BGR, "RGB": ColorFormat.RGB}
    ti.tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC")).set_color_format(colors[spec.host_color])
    ti.model().set_layout(ov.Layout(layout))
    pre = ti.preprocess()
    if spec.resize_from is not None:
        from openvino.preprocess import PaddingMode, ResizeAlgorithm

        ti.tensor().set_shape([1, spec.resize_from[0], spec.resize_from[1], 3])
        ih, iw = spec.inner or (h, w)
        pre.resize(ResizeAlgorithm.RESIZE_LINEAR, ih, iw)
        pre.convert_element_type(ov.Type.f32)  # OpenVINO pads float tensors only
        if (ih, iw) != (h, w):
            top, left = spec.pad_top_left
            pre.pad([0, top, left, 0], [0, h - ih - top, w - iw - left, 0], float(spec.pad_value),
                    PaddingMode.CONSTANT)
    else:
        pre.convert_element_type(ov.Type.f32)
    if spec.host_color != spec.model_color:
        pre.convert_color(colors[spec.model_color])
    if spec.mean is not None:
        pre.mean(list(spec.mean))
    if spec.scale is not None:
        pre.scale(list(spec.scale))
    for i in range(len(model.outputs)):
        ppp.output(i).tensor().set_element_type(ov.Type.f32)
    return ppp.build()


def onnx_metadata(model: Any) -> dict[str, str]:
    """ONNX ``metadata_props`` as OpenVINO exposes them under rt_info 'framework'."""
    out: dict[str, str] = {}
    try:
        info = model.get_rt_info()
        fw = info["framework"] if "framework" in info else None
        if fw is not None:
            fw = fw.astype(dict) if hasattr(fw, "astype") else dict(fw)
            for key, value in fw.items():
                out[str(key)] = str(value.value if hasattr(value, "value") else value)
    except Exception:  # noqa: BLE001 - metadata is optional
        pass
    return out
