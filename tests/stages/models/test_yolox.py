"""The ``yolox`` family: raw grid output decoded with strides 8/16/32, top-left letterbox."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stages.models.yolo_common import cell_grid
from tests.stages.models.synthetic import constant_model
from tests.stages.models.test_yolo import detect

CELLS_64 = 64 + 16 + 4


def raw_head(rows: dict[int, list[float]], classes: int = 3) -> np.ndarray:
    head = np.zeros((1, CELLS_64, 5 + classes), np.float32)
    for index, values in rows.items():
        head[0, index] = values
    return head


def test_grid_order_is_stride_then_row_then_column() -> None:
    grid, stride = cell_grid((64, 64))
    assert grid.shape == (CELLS_64, 2) and stride.shape == (CELLS_64, 1)
    assert grid[9].tolist() == [1, 1] and stride[9, 0] == 8      # stride 8: 8 cells per row
    assert grid[64 + 6].tolist() == [2, 1] and stride[70, 0] == 16
    assert grid[83].tolist() == [1, 1] and stride[83, 0] == 32


def test_cells_decode_to_exact_boxes_in_source_pixels(tmp_path: Path) -> None:
    # cell (x 2, y 1) at stride 16: offsets (0.5, 0.25), log size (ln 2, 0)
    # -> centre (40, 20), size 32 x 16 -> box (24, 12, 56, 28) in model-input pixels
    head = raw_head({64 + 4 + 2: [0.5, 0.25, np.log(2), 0.0, 0.9, 0.1, 0.8, 0.0],
                     5: [0.0, 0.0, 0.0, 0.0, 0.9, 0.2, 0.0, 0.0]})  # score 0.18: under 0.3
    path = constant_model(tmp_path / "yolox.xml", {"output": head}, input_name="images")
    dets = detect(path, decoder="yolox")  # 128x64 -> 64x32 at the top-left, scale 0.5
    assert dets.class_id.tolist() == [1]
    np.testing.assert_allclose(dets.score, [0.72], atol=1e-6)
    np.testing.assert_allclose(dets.xyxy, [[48, 24, 112, 56]], atol=1e-4)


def test_nms_is_class_agnostic_by_default(tmp_path: Path) -> None:
    same = [0.5, 0.5, 0.0, 0.0]
    head = raw_head({10: same + [1.0, 0.9, 0.0, 0.0], 11: [-0.5, 0.5, 0.0, 0.0, 1.0, 0.0, 0.8, 0.0]})
    path = constant_model(tmp_path / "yolox.xml", {"output": head})
    assert detect(path, decoder="yolox", iou=0.1).class_id.tolist() == [0]
    assert detect(path, decoder="yolox", iou=0.1, agnostic_nms=False).class_id.tolist() == [0, 1]


def test_other_strides_as_an_option(tmp_path: Path) -> None:
    head = np.zeros((1, 64 + 16, 6), np.float32)
    head[0, 64 + 5] = [0, 0, 0, 0, 1.0, 1.0]  # cell (1, 1) at stride 16 -> centre (16, 16), size 16
    path = constant_model(tmp_path / "yolox.xml", {"output": head})
    dets = detect(path, width=64, height=64, decoder="yolox", options={"strides": [8, 16]})
    np.testing.assert_allclose(dets.xyxy, [[8, 8, 24, 24]], atol=1e-4)
    with pytest.raises(ValueError, match="strides must be a list of positive integers"):
        detect(path, decoder="yolox", options={"strides": "8"})
