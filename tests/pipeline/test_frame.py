"""Frame pixels straight from the decoder's YUV planes agree with converting first.

The reference is what a user would do: FFmpeg converts the whole frame to RGB
(``to_ndarray``), then OpenCV warps or resizes it.  vapipe warps/resizes the Y, U
and V planes on their own and converts only the small result; both must give the
same picture up to interpolation rounding.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from pipeline.frame import Frame
from tests.media import frames_of

# Camera video (shared folder): the agreement bounds below are for its soft chroma.  On
# synthetic text with sharp colour edges the two ways differ by design (limited-range
# crops carry chroma at half the output size; the reference converts with FFmpeg's own
# chroma upsampling): p99 up to 28 levels was measured there.
CLIP = "one-by-one-person-detection.mp4"  # H.264 yuv420p, limited range


@pytest.fixture(scope="module")
def decoded(videos_dir: Path) -> list:
    import av

    with av.open(str(videos_dir / CLIP)) as c:
        frames = [f for _, f in zip(range(40), c.decode(video=0))][::13]
    assert frames and frames[0].format.name == "yuv420p"
    return frames


def _frame(av_frame) -> Frame:
    return Frame(source_id="t", seq=0, width=av_frame.width, height=av_frame.height, av_frame=av_frame)


def _full_range(av_frame):
    """The same picture as a full-range (yuvj420p, JPEG) frame."""
    import av

    rgb = av_frame.to_ndarray(format="rgb24")
    return av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuvj420p")


def _rotation(w: int, h: int, out: tuple[int, int], angle: float, scale: float) -> np.ndarray:
    """Source -> output affine: rotate about a point right of centre, scale, centre in ``out``."""
    centre = (w * 0.6, h * 0.45)
    m = cv2.getRotationMatrix2D(centre, angle, scale)
    m[:, 2] += np.array([out[0] / 2, out[1] / 2]) - m[:, :2] @ np.array(centre)
    return m


def _compare(ours: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    d = np.abs(ours.astype(np.int16) - ref.astype(np.int16))
    return float(d.mean()), float(np.percentile(d, 99))


@pytest.mark.parametrize("size", [(192, 192), (128, 128), (191, 97)])
@pytest.mark.parametrize("fmt", ["rgb24", "bgr24"])
@pytest.mark.parametrize("full_range", [False, True])
def test_warped_matches_convert_then_warp(decoded, size, fmt: str, full_range: bool) -> None:
    """Rotated, scaled crops (even and odd sizes, both ranges, both colour orders)."""
    for av_frame in decoded:
        src = _full_range(av_frame) if full_range else av_frame
        m = _rotation(src.width, src.height, size, angle=17.0, scale=size[0] / 260)
        ours = _frame(src).warped(m, size[0], size[1], fmt)
        ref = cv2.warpAffine(src.to_ndarray(format=fmt), m, size, flags=cv2.INTER_LINEAR,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
        assert ours.shape == (size[1], size[0], 3) and ours.dtype == np.uint8
        mean, p99 = _compare(ours, ref)
        assert mean < 2.0 and p99 <= 12, (mean, p99)


def test_warped_outside_the_frame_is_black(clip: Path) -> None:
    m = np.array([[1.0, 0.0, -5000.0], [0.0, 1.0, 0.0]])  # everything maps off the output
    out = _frame(frames_of(clip, 1)[0]).warped(m, 64, 32, "rgb24")
    assert out.max() <= 1  # limited-range black (16) expands to 0


@pytest.mark.parametrize("size", [(224, 126), (128, 72), (99, 55)])
def test_resized_matches_convert_then_resize(decoded, size) -> None:
    for av_frame in decoded:
        ours = _frame(av_frame).resized(size[0], size[1], "rgb24")
        ref = cv2.resize(av_frame.to_ndarray(format="rgb24"), size, interpolation=cv2.INTER_LINEAR)
        assert ours.shape == (size[1], size[0], 3)
        mean, p99 = _compare(ours, ref)
        assert mean < 1.5 and p99 <= 4, (mean, p99)


@pytest.mark.parametrize("image,needle", [
    (np.zeros((4, 6), np.uint8), "got uint8 (4, 6) (grayscale: convert with cv2.cvtColor(image, cv2.COLOR_GRAY2BGR))"),
    (np.zeros((4, 6, 1), np.uint8), "got uint8 (4, 6, 1) (grayscale: convert with"),
    (np.zeros((4, 6, 4), np.uint8), "got uint8 (4, 6, 4) (4 channels: convert with cv2.cvtColor(image, "
                                    "cv2.COLOR_BGRA2BGR)"),
    (np.zeros((4, 6, 3), np.float32), "got float32 (4, 6, 3)"),
    (np.zeros((0, 6, 3), np.uint8), "got uint8 (0, 6, 3)"),
])
def test_from_image_rejects_other_arrays_in_one_line(image: np.ndarray, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        Frame.from_image(image)
    message = str(info.value)
    assert "\n" not in message and message.startswith("Frame.from_image expects a BGR uint8 array (H, W, 3), ")
    assert needle in message


@pytest.mark.parametrize("image,name", [(None, "NoneType"), ([[1, 2, 3]], "list")])
def test_from_image_names_what_it_got_instead_of_an_array(image: object, name: str) -> None:
    with pytest.raises(TypeError, match=f"^Frame.from_image expects a BGR uint8 numpy array \\(H, W, 3\\), got {name}$"):
        Frame.from_image(image)  # type: ignore[arg-type]


def test_from_image_keeps_the_array() -> None:
    image = np.zeros((4, 6, 3), np.uint8)
    frame = Frame.from_image(image)
    assert (frame.width, frame.height) == (6, 4) and frame.image() is image


@pytest.mark.parametrize("kwargs, error", [
    ({"xyxy": np.zeros((4, 5)), "score": [1] * 4, "label": "x"}, r"^Detections.xyxy must be \(N, 4\) box corners .*"
                                                                 r"got shape \(4, 5\)$"),
    ({"xyxy": [[0, 0, 1, 1]], "score": [0.5], "label": ["a", "b"]}, r"^Detections.label has 2 entries but xyxy "
                                                                    r"has 1 boxes$"),
    ({"xyxy": [[0, 0, 1, 1]], "score": None, "label": "a"}, r"^Detections.score is None"),
    ({"xyxy": [[0, 0, 1, 1], [1, 1, 2, 2]], "score": [0.5], "label": "a"}, r"^Detections.score has 1 entries"),
])
def test_detections_made_by_hand_name_the_field_that_does_not_fit(kwargs: dict, error: str) -> None:
    from pipeline.frame import Detections

    with pytest.raises((ValueError, TypeError), match=error):
        Detections(**kwargs)


def test_detections_take_one_box_lists_and_empty_input() -> None:
    from pipeline.frame import Detections

    one = Detections(xyxy=[10, 20, 30, 40], score=[0.9], label="cat")
    assert one.xyxy.shape == (1, 4) and one.label.tolist() == ["cat"]
    assert len(Detections(xyxy=[], score=[], label=[])) == 0


@pytest.mark.parametrize("full_range", [False, True])
def test_gray_is_full_range_luma_whichever_way_it_is_made(decoded, full_range: bool) -> None:
    """Scaled or warped from the planes, gray is what OpenCV makes of the frame's BGR image."""
    size = (224, 126)
    for av_frame in decoded:
        src = _full_range(av_frame) if full_range else av_frame
        ref = cv2.cvtColor(src.to_ndarray(format="bgr24"), cv2.COLOR_BGR2GRAY)
        scaled = _frame(src).resized(size[0], size[1], "gray")
        sx, sy = size[0] / src.width, size[1] / src.height   # pixel centres onto pixel centres, as cv2.resize
        m = np.array([[sx, 0.0, 0.5 * sx - 0.5], [0.0, sy, 0.5 * sy - 0.5]])
        warped = _frame(src).warped(m, size[0], size[1], "gray")
        small = cv2.resize(ref, size, interpolation=cv2.INTER_LINEAR)
        for ours in (scaled, warped):
            assert ours.shape == (size[1], size[0]) and ours.dtype == np.uint8
            mean, p99 = _compare(ours, small)
            assert mean < 1.5 and p99 <= 4, (mean, p99)
