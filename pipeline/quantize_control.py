"""Accuracy control for ``vapipe quantize``: which layers of the INT8 model go back to f32.

NNCF quantises every convolution and matrix product of a detector.  Where that model keeps
enough of the f32 model's boxes on the validation frames (the calibration frames), it is
kept as it is.  Otherwise the layers are ranked, cheaply, by the harm each does alone:
a copy of the model with only that layer INT8 runs on a few frames, and its boxes are
compared with the f32 boxes (1 - IoU plus the score difference, per box).  Layers are
taken least harm per multiply-add first (the speed an INT8 layer brings grows with its
multiply-adds), and a binary search finds the longest run of them that still keeps the
target share of the f32 boxes; every other layer goes back to f32.  Layers under
``MIN_MAC_SHARE`` of the multiply-adds are not worth the search and stay f32 then.

A layer goes back to f32 by removing its FakeQuantize nodes (weights and the activation
quantisers in front of it) and restoring its original bias, so the model written is
exactly the model validated.  NNCF's own ``quantize_with_accuracy_control`` does the same
with a costlier ranking (every quantiser group, by output error or by the metric on the
frames it harms most): on the pose detector, with the same metric and a 3-point drop, it
reverted all 90 operations in 17 minutes without getting there; this takes ~15 s of CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Sequence

import numpy as np

from .records import box_iou, compare_records

__all__ = ["Boxes", "ControlResult", "QuantizedLayers", "Runner", "compress_weights", "control", "matched"]

#: weighted operations the control keeps INT8 or not; the others' quantisers (depthwise
#: convolutions, additions) go whenever layers go back to f32 (on AVX2, NNCF's INT8
#: depthwise convolutions ran in f32 kernels anyway)
WEIGHTED_TYPES = ("Convolution", "MatMul")
#: operations a quantiser may sit behind on its way to a weighted layer's input
_PASS_THROUGH = {"Convert", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Pad", "DepthToSpace", "SpaceToDepth",
                 "MaxPool", "Concat", "StridedSlice", "Split", "VariadicSplit", "Interpolate"}
#: layers with a smaller share of the multiply-adds stay f32 when the control searches
MIN_MAC_SHARE = 0.03
#: validation frames (with boxes) each layer's harm is measured on
SENSITIVITY_FRAMES = 8

#: boxes of one frame: xyxy (N, 4) in source pixels and scores (N,)
Boxes = tuple[np.ndarray, np.ndarray]
#: compiles a model once and returns what runs it on the validation frames with given indices
Runner = Callable[[Any], Callable[[Iterable[int]], list[Boxes]]]


def _records(boxes: Boxes) -> dict[str, Any]:
    return {"objects": [{"box": [float(v) for v in b]} for b in boxes[0]]}


def matched(reference: Sequence[Boxes], other: Sequence[Boxes], min_iou: float) -> tuple[int, int]:
    """(reference boxes matched one to one by ``other``'s at IoU >= ``min_iou``, reference boxes)."""
    a = compare_records({str(i): _records(b) for i, b in enumerate(reference)},
                        {str(i): _records(b) for i, b in enumerate(other)}, min_iou=min_iou)
    return a["matched"], a["objects_ref"]


def _harm(reference: Sequence[Boxes], other: Sequence[Boxes]) -> float:
    """Mean over the reference boxes of 1 - IoU and the score difference with the best
    overlapping box (1 for a box with none): a smooth measure of how far ``other`` moved."""
    errors = []
    for (ref_xyxy, ref_scores), (xyxy, scores) in zip(reference, other):
        if not len(ref_xyxy):
            continue
        if not len(xyxy):
            errors += [1.0] * len(ref_xyxy)
            continue
        iou = box_iou(np.asarray(ref_xyxy, float), np.asarray(xyxy, float))
        best = iou.argmax(axis=1)
        moved = np.abs(np.asarray(ref_scores) - np.asarray(scores)[best])
        errors += list(1.0 - iou[np.arange(len(best)), best] + moved)
    return float(np.mean(errors)) if errors else 0.0


def _macs(op: Any) -> int:
    """Multiply-adds of a Convolution or MatMul with static shapes (1 when they are not)."""
    out, w = op.get_output_partial_shape(0), op.get_input_partial_shape(1)
    if not (out.is_static and w.is_static):
        return 1
    if op.get_type_name() == "Convolution":
        return math.prod(out.to_shape()) * math.prod(w.to_shape()[1:])
    a = op.get_input_partial_shape(0)
    if not a.is_static:
        return 1
    inner = a.to_shape()[-2] if op.get_attributes().get("transpose_a") else a.to_shape()[-1]
    return math.prod(out.to_shape()) * inner


def _const_only(value: Any) -> bool:
    node = value.get_node()
    if node.get_type_name() == "Parameter":
        return False
    return node.get_type_name() == "Constant" or all(_const_only(v) for v in node.input_values())


def _bias_input(op: Any) -> Any | None:
    """The Add input port carrying ``op``'s bias (a constant added to its output), or None."""
    for target in op.output(0).get_target_inputs():
        add = target.get_node()
        if add.get_type_name() == "Add":
            port = add.input(1 - target.get_index())
            if _const_only(port.get_source_output()):
                return port
    return None


def _quantizers_of(op: Any) -> set[str]:
    """Names of the FakeQuantize nodes in front of ``op``'s inputs (through layout-only ops)."""
    found: set[str] = set()
    stack = [v.get_node() for v in op.input_values()]
    while stack:
        node = stack.pop()
        if node.get_type_name() == "FakeQuantize":
            found.add(node.get_friendly_name())
        elif node.get_type_name() in _PASS_THROUGH:
            stack += [v.get_node() for v in node.input_values()]
    return found


@dataclass(frozen=True)
class Layer:
    name: str       # friendly name of the Convolution / MatMul in the model
    macs: int


class QuantizedLayers:
    """An NNCF-quantised model whose weighted layers can each go back to f32.

    ``original`` is the model NNCF quantised (its biases are restored from it); ``quantized``
    must keep FakeQuantize nodes on its weights (NNCF's ``backend_params``
    ``{"compress_weights": False}``; :func:`compress_weights` packs them before saving).
    Neither model is modified: :meth:`variant` returns a new model."""

    def __init__(self, original: Any, quantized: Any) -> None:
        self.original = original
        self.quantized = quantized
        self._original_ops = {op.get_friendly_name(): op for op in original.get_ordered_ops()}
        self._quantizers: dict[str, set[str]] = {}
        self.layers: list[Layer] = []
        for op in quantized.get_ordered_ops():
            if op.get_type_name() in WEIGHTED_TYPES:
                quantizers = _quantizers_of(op)
                if quantizers:
                    self._quantizers[op.get_friendly_name()] = quantizers
                    self.layers.append(Layer(op.get_friendly_name(), _macs(op)))

    def variant(self, int8: Collection[str]) -> Any:
        """A copy in which only the layers named in ``int8`` stay INT8: every other
        FakeQuantize node is removed and the other layers get their original bias back."""
        keep = set().union(*(self._quantizers[name] for name in int8)) if int8 else set()
        model = self.quantized.clone()
        for op in model.get_ordered_ops():
            if op.get_type_name() == "FakeQuantize" and op.get_friendly_name() not in keep:
                op.output(0).replace(op.input_value(0))
            elif op.get_friendly_name() in self._quantizers and op.get_friendly_name() not in int8:
                port, original = _bias_input(op), self._original_ops.get(op.get_friendly_name())
                original_port = _bias_input(original) if original is not None else None
                if port is not None and original_port is not None:
                    port.replace_source_output(original_port.get_source_output())
        return model


def compress_weights(model: Any) -> Any:
    """``model`` with its quantised weights stored as int8, as NNCF stores them by default."""
    try:
        from openvino._offline_transformations import compress_quantize_weights_transformation
    except ImportError:  # the weights stay f32 with their FakeQuantize nodes: same results
        return model
    compress_quantize_weights_transformation(model)
    return model


@dataclass
class ControlResult:
    kept: float                      # share of the f32 boxes the chosen model keeps on the validation frames
    target: float
    int8: list[str]                  # layers left INT8
    f32: list[str]                   # quantised layers that went back to f32 (empty: NNCF's model as is)
    int8_macs: float                 # share of the weighted layers' multiply-adds left INT8


def control(layers: QuantizedLayers, runner: Runner, reference: Sequence[Boxes], target: float, min_iou: float,
            log: Callable[[str], None] = lambda msg: None) -> tuple[Any, ControlResult]:
    """The INT8 model to write and what was decided.

    ``runner`` runs models on the validation frames; ``reference`` is the f32 model's boxes
    on every validation frame; ``target`` the share of them the result must keep.  Raises
    ValueError when not even the least harmful layer alone keeps the target."""
    total_macs = sum(layer.macs for layer in layers.layers) or 1
    everything = [layer.name for layer in layers.layers]
    n_ref = sum(len(b[0]) for b in reference)
    allowed = math.floor((1.0 - target) * n_ref + 1e-9)   # boxes the model may lose

    def passes(model: Any) -> tuple[bool, float]:
        """Whether ``model`` keeps the target share, and the share kept (an upper bound when it
        misses: the frames are run in chunks and the run stops once too many boxes are lost)."""
        run, lost = runner(model), 0
        for start in range(0, len(reference), 25):
            frames = range(start, min(start + 25, len(reference)))
            hit, total = matched([reference[i] for i in frames], run(frames), min_iou)
            lost += total - hit
            if lost > allowed:
                break
        return lost <= allowed, 1.0 - lost / max(n_ref, 1)

    ok, kept = passes(layers.quantized)
    if ok:
        return layers.quantized, ControlResult(kept, target, everything, [], 1.0)
    log(f"INT8 keeps at most {kept:.1%} of the f32 boxes on the calibration frames (target {target:.1%}); "
        f"ranking the layers")
    candidates = [layer for layer in layers.layers if layer.macs >= MIN_MAC_SHARE * total_macs]
    with_boxes = [i for i, b in enumerate(reference) if len(b[0])]
    probe = sorted({with_boxes[round(j)] for j in np.linspace(0, len(with_boxes) - 1,
                                                               min(SENSITIVITY_FRAMES, len(with_boxes)))})
    harm = {layer.name: _harm([reference[i] for i in probe], runner(layers.variant([layer.name]))(probe))
            for layer in candidates}
    ranked = sorted(candidates, key=lambda layer: harm[layer.name] / layer.macs)
    if not ranked:
        raise ValueError(f"no convolution or matrix layer has {MIN_MAC_SHARE:.0%} of the multiply-adds to keep INT8")
    # the longest run of the ranking that keeps the target (assumed to shrink as layers are added)
    lo, hi, best_kept = 0, len(ranked), 1.0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        ok, kept = passes(layers.variant([layer.name for layer in ranked[:mid]]))
        log(f"  {mid} of {len(ranked)} layers INT8: {'keeps' if ok else 'misses'} the target ({kept:.1%})")
        if ok:
            lo, best_kept = mid, kept
        else:
            hi = mid - 1
    if lo == 0:
        raise ValueError(f"no layer can be INT8: the least harmful one alone keeps less than {target:.1%} of the "
                         f"f32 boxes on the calibration frames")
    chosen = [layer.name for layer in ranked[:lo]]
    int8 = [name for name in everything if name in chosen]
    return layers.variant(chosen), ControlResult(
        best_kept, target, int8, [name for name in everything if name not in chosen],
        sum(layer.macs for layer in ranked[:lo]) / total_macs)
