"""Models with an image-size input beside the image (Open Model Zoo's Faster R-CNN kind).

Such a model has one 4-D image input and one 2-D input ``[1, 3]`` (or ``[1, 2]``) that
tells it the image's height, width (and scale) in model-input pixels; model_api fills it
with ``[[height, width, 1]]``.  vapipe stages feed one tensor per request, so the
second input becomes a constant of the model before it is compiled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["image_info_inputs", "image_input", "fold_image_info", "ACCEPTED_INPUTS"]

#: the inputs a model of an image stage may have, for messages
ACCEPTED_INPUTS = "exactly one 4-D image input (beside it, at most image-size inputs of [1, 2] or [1, 3])"


def image_info_inputs(model: Any) -> list[Any]:
    """The model's image-size inputs: 2-D, static, ``[1, 2]`` or ``[1, 3]``, beside exactly
    one 4-D input; [] for every other model."""
    ranks = [i.get_partial_shape().rank for i in model.inputs]
    if not all(r.is_static for r in ranks) or [r.get_length() for r in ranks].count(4) != 1:
        return []
    extra = [i for i, r in zip(model.inputs, ranks) if r.get_length() != 4]
    if all(i.get_partial_shape().is_static and list(i.get_partial_shape().to_shape()) in ([1, 2], [1, 3])
           for i in extra):
        return extra
    return []


def image_input(model: Any) -> Any | None:
    """The model's one input besides its image-size inputs (the image, if the model is of
    the accepted kind; the caller checks its shape), or None if there are more or none."""
    sizes = image_info_inputs(model)
    rest = [i for i in model.inputs if i not in sizes]
    return rest[0] if len(rest) == 1 else None


def fold_image_info(model: Any, input_hw: tuple[int, int]) -> Any:
    """``model`` with each image-size input replaced by the constant ``[[height, width, 1]]``
    (the first two values for a ``[1, 2]`` input) for an image input of ``input_hw``; the
    model is changed in place and returned."""
    from openvino import opset13 as ops

    for port in image_info_inputs(model):
        width = int(port.get_partial_shape().to_shape()[1])
        values = np.array([input_hw[0], input_hw[1], 1][:width], np.float64)[None]
        param = port.get_node()
        const = ops.constant(values.astype(param.get_element_type().to_dtype()))
        for target in param.output(0).get_target_inputs():
            target.replace_source_output(const.output(0))
        model.remove_parameter(param)
    model.validate_nodes_and_infer_types()
    return model
