"""BlazeFace short-range face detector (MediaPipe ``face_detection_short_range``).

Input 128x128 RGB scaled to [-1, 1], letterboxed with zero padding.  Outputs
896 anchors x (box + 6 keypoints) regressors and 896 logits; decoded with the
anchor grid and settings of MediaPipe's face detection graph, then merged with
weighted NMS.  Keypoint order (subject's left/right): right eye, left eye,
nose tip, mouth centre, right ear tragion, left ear tragion.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pipeline.engine import InputSpec
from pipeline.frame import Detections, Frame

from .base import DetectorAdapter, Letterbox, register
from .nms import weighted_nms
from .ssd_anchors import (FACE_SHORT_RANGE, SsdAnchorConfig, decode_ssd, generate_anchors, indices_above,
                          sigmoid_scores, split_outputs)

__all__ = ["BlazeFace", "MediaPipeSsd", "FACE_KEYPOINTS"]

FACE_KEYPOINTS = ("right_eye", "left_eye", "nose_tip", "mouth_center", "right_ear_tragion", "left_ear_tragion")


class MediaPipeSsd(DetectorAdapter):
    """Shared input preparation and decoding of MediaPipe's single-class SSD detectors.

    MediaPipe builds the input with an affine warp that maps the padded frame's
    corners onto the tensor's corners: model pixel i samples source position
    ``i * s`` (s = source pixels per model pixel).  :meth:`prepare_input` does
    exactly that; the detectors are sensitive to the sampling grid, so this is
    what makes results agree with MediaPipe's.  A plain resize samples at
    ``(i + 0.5) * s - 0.5`` instead; for that path, ``sample_offset`` (model-input
    pixels, added to every decoded coordinate) undoes most of the shift (the
    exact value would be ``0.5 - 0.5 / s``).  :meth:`prepare_input` returns a
    mapping that cancels the offset again.
    """

    anchor_config: ClassVar[SsdAnchorConfig]
    num_keypoints: ClassVar[int]
    score_clip: ClassVar[float] = 100.0

    def __init__(self, score_threshold: float, iou_threshold: float, max_objects: int | None,
                 sample_offset: float) -> None:
        if not 0.0 <= score_threshold <= 1.0:
            raise ValueError(f"score_threshold must be in [0, 1], got {score_threshold}")
        if not 0.0 <= iou_threshold <= 1.0:
            raise ValueError(f"iou_threshold must be in [0, 1], got {iou_threshold}")
        if max_objects is not None and max_objects < 1:
            raise ValueError(f"max_objects must be >= 1 or None, got {max_objects}")
        self.score_threshold = float(score_threshold)
        self.iou_threshold = float(iou_threshold)
        self.max_objects = max_objects
        self.sample_offset = float(sample_offset)

    def prepare_input(self, frame: Frame, input_hw: tuple[int, int]) -> tuple[np.ndarray, Letterbox]:
        """Model input (H, W, 3) uint8 in ``input_spec.host_color`` order, zero-padded to
        keep the aspect ratio, plus the mapping from decoded coordinates to source pixels."""
        th, tw = input_hw
        sh, sw = frame.height, frame.width
        # Pad the frame to the tensor's aspect ratio around its centre (MediaPipe's keep_aspect_ratio).
        if th / tw > sh / sw:
            rw, rh = float(sw), sw * th / tw
        else:
            rw, rh = sh * tw / th, float(sh)
        sx, sy = tw / rw, th / rh
        px, py = (rw - sw) / 2 * sx, (rh - sh) / 2 * sy
        warp = np.array([[sx, 0.0, px], [0.0, sy, py]], np.float64)
        fmt = "rgb24" if self.input_spec.host_color == "RGB" else "bgr24"
        image = frame.warped(warp, tw, th, fmt)
        box = Letterbox(scale_x=sx, scale_y=sy, pad_x=px + self.sample_offset, pad_y=py + self.sample_offset,
                        inner=(max(1, round(sw * sx)), max(1, round(sh * sy))))
        return image, box

    @classmethod
    def output_problem(cls, shapes: list[tuple[int, ...]]) -> str | None:
        cfg = cls.anchor_config
        n, num_coords = len(generate_anchors(cfg)), 4 + 2 * cls.num_keypoints
        want = f"reads [1,{n},{num_coords}] regressors and [1,{n},1] scores"

        def fits(shape: tuple[int, ...], last: int) -> bool:
            return len(shape) == 3 and shape[-1] == last and shape[1] in (n, -1)

        if len(shapes) != 2 or not any(fits(s, num_coords) for s in shapes) or not any(fits(s, 1) for s in shapes):
            return want
        return None

    def candidates(self, outputs: list[np.ndarray], input_hw: tuple[int, int]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Merged detections: boxes (M, 4), scores (M,), keypoints (M, K, 2), model-input pixels."""
        cfg = self.anchor_config
        num_coords = 4 + 2 * self.num_keypoints
        reg, logits = split_outputs(outputs, num_coords)
        all_anchors = generate_anchors(cfg)
        if len(reg) != len(all_anchors):
            raise ValueError(f"{type(self).__name__}: model has {len(reg)} boxes but the anchor grid "
                             f"{cfg.input_size_width}x{cfg.input_size_height} has {len(all_anchors)}")
        keep = indices_above(logits, self.score_threshold, self.score_clip)
        if len(keep) == 0:
            empty = np.zeros((0, 4), np.float32)
            return empty, np.zeros((0,), np.float32), np.zeros((0, self.num_keypoints, 2), np.float32)
        anchors = all_anchors[keep]
        scales = (float(cfg.input_size_width), float(cfg.input_size_height),
                  float(cfg.input_size_width), float(cfg.input_size_height))
        boxes, kps = decode_ssd(reg[keep], anchors, scales, self.num_keypoints, input_hw)
        sc = sigmoid_scores(logits[keep], self.score_clip)
        w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        ok = (w >= 0) & (h >= 0) & np.isfinite(w) & np.isfinite(h)
        merged = weighted_nms(boxes[ok], sc[ok], self.iou_threshold, kps[ok], self.max_objects)
        out_kps = merged.keypoints if merged.keypoints is not None else np.zeros((0, self.num_keypoints, 2))
        return (merged.boxes + self.sample_offset, merged.scores, out_kps + self.sample_offset)


@register("blazeface")
class BlazeFace(MediaPipeSsd):
    """Faces with 6 keypoints, label "face"; settings default to MediaPipe's graph."""

    input_spec: ClassVar[InputSpec] = InputSpec(host_color="RGB", model_color="RGB",
                                                mean=(127.5,) * 3, scale=(127.5,) * 3)
    letterbox: ClassVar[bool] = True
    anchor_config: ClassVar[SsdAnchorConfig] = FACE_SHORT_RANGE
    num_keypoints: ClassVar[int] = 6

    def __init__(self, score_threshold: float = 0.5, iou_threshold: float = 0.3, max_objects: int | None = None,
                 sample_offset: float = 0.5, label: str = "face") -> None:
        super().__init__(score_threshold, iou_threshold, max_objects, sample_offset)
        self.label = label

    def decode(self, outputs: list[np.ndarray], input_hw: tuple[int, int]) -> Detections:
        """Faces in model-input pixels; keypoints (6, 2) per face."""
        boxes, scores, kps = self.candidates(outputs, input_hw)
        return Detections(xyxy=boxes, score=scores, label=self.label, keypoints=list(kps))
