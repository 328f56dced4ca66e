"""Transformed views read straight from the decoder's planes agree with transforming the
converted full-size image with OpenCV; masks black out exactly the polygons.

The reference is what a user would write: convert the whole frame to BGR with FFmpeg
(``to_ndarray``), then crop, turn and mirror it with NumPy and scale or warp it with
OpenCV.  Frames are generated (no shared assets needed).
"""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest

from pipeline.frame import Detections, Frame
from pipeline.frame_view import BufferPool, TransformedFrame, masked
from stages.preprocess import Preprocess

W, H = 320, 180


def _scene(w: int = W, h: int = H, seed: int = 0) -> np.ndarray:
    """A smooth, colourful BGR picture with some detail.  Edges are soft, as in camera video:
    a hard saturated edge differs by up to ~50 levels between 4:2:0 chroma interpolated at half
    resolution and the converted picture, for the plain frame as for views."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(xs / 17 + k) * np.cos(ys / 23 - k) for k in (0.0, 1.3, 2.6)], -1)
    img += rng.normal(0, 6, img.shape)
    cv2.rectangle(img, (w // 5, h // 4), (w // 2, h // 2), (190, 110, 90), -1)
    return cv2.GaussianBlur(np.clip(img, 0, 255).astype(np.uint8), (0, 0), 1.5)


def _decoded(fmt: str = "yuv420p", seed: int = 0, w: int = W, h: int = H) -> av.VideoFrame:
    return av.VideoFrame.from_ndarray(_scene(w, h, seed), format="bgr24").reformat(format=fmt)


def _frame(av_frame: av.VideoFrame) -> Frame:
    return Frame(source_id="t", seq=0, width=av_frame.width, height=av_frame.height, av_frame=av_frame)


def _reference_view(img: np.ndarray, crop, rotate: int, flip: str) -> np.ndarray:
    if crop is not None:
        x1, y1, x2, y2 = crop
        img = img[y1:y2, x1:x2]
    img = np.rot90(img, k=-rotate // 90)
    if flip == "horizontal":
        img = img[:, ::-1]
    elif flip == "vertical":
        img = img[::-1]
    return np.ascontiguousarray(img)


def _diff(ours: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    d = np.abs(ours.astype(np.int16) - ref.astype(np.int16))
    return float(d.mean()), float(np.percentile(d, 99))


CROPS = [None, (40, 20, 300, 170), (41, 21, 299, 169)]  # none, even corner, odd corner
CASES = [(c, r, f) for c in CROPS for r in (0, 90, 180, 270) for f in ("none", "horizontal")] + \
        [(CROPS[1], 90, "vertical")]


@pytest.mark.parametrize("fmt", ["yuv420p", "yuvj420p"])
@pytest.mark.parametrize("crop,rotate,flip", CASES)
def test_view_pixels_match_transforming_the_converted_frame(fmt: str, crop, rotate: int, flip: str) -> None:
    src = _decoded(fmt)
    full = src.to_ndarray(format="bgr24")
    ref = _reference_view(full, crop, rotate, flip)
    stage = Preprocess(crop=list(crop) if crop else None, rotate=rotate, flip=flip)
    view = stage(_frame(src))
    assert isinstance(view, TransformedFrame) or (crop is None and rotate == 0 and flip == "none")
    assert (view.width, view.height) == (ref.shape[1], ref.shape[0])

    for size, out_fmt in (((96, 64), "rgb24"), ((61, 37), "bgr24")):  # even (I420 path) and odd sizes
        ours = view.resized(*size, out_fmt)
        want = cv2.resize(ref, size, interpolation=cv2.INTER_LINEAR)
        mean, p99 = _diff(ours, want[..., ::-1] if out_fmt == "rgb24" else want)
        assert mean < 2.0 and p99 <= 12, (size, mean, p99)
        assert view.resized(*size, out_fmt) is ours  # cached

    # a rotated, scaled crop of the view, partly outside it: black there, also where the
    # decoded frame has pixels beyond the view's crop
    m = cv2.getRotationMatrix2D((view.width * 0.7, view.height * 0.4), 23.0, 0.8)
    m[:, 2] += np.array([64, 48]) - m[:, :2] @ np.array([view.width * 0.7, view.height * 0.4])
    ours = view.warped(m, 128, 96, "bgr24")
    want = cv2.warpAffine(ref, m, (128, 96), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    mean, p99 = _diff(ours, want)
    assert mean < 2.0 and p99 <= 16, (mean, p99)
    touched = cv2.warpAffine(np.full(ref.shape[:2], 255, np.uint8), m, (128, 96), flags=cv2.INTER_LINEAR)
    outside = cv2.dilate(touched, np.ones((5, 5), np.uint8)) == 0  # 2 px off: chroma covers 2x2 pixels
    assert outside.any() and ours[outside].max() <= 6  # black (a tint of chroma at odd crop edges)

    # replicated edges: the view's own edge pixels (4:2:0 chroma replicates at half resolution)
    ours = view.warped(m, 128, 96, "bgr24", border="replicate")
    want = cv2.warpAffine(ref, m, (128, 96), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    mean, p99 = _diff(ours, want)
    assert mean < 3.0 and p99 <= 20, (mean, p99)

    # the full-size image: cut from FFmpeg's conversion of the decoded frame, so exact
    assert np.array_equal(stage(_frame(src)).image(), ref)


def _turned_frame(src: av.VideoFrame, crop, rotate: int, flip: str) -> Frame:
    """A decoder frame whose planes are ``src``'s turned beforehand (as FFmpeg's transpose,
    hflip and vflip filters do: exact moves of luma and chroma samples)."""
    i420 = src.to_ndarray()
    h, w = src.height, src.width
    y = i420[:h]
    u = i420[h:h + h // 4].reshape(h // 2, w // 2)
    v = i420[h + h // 4:].reshape(h // 2, w // 2)
    turned = []
    for plane, k in ((y, 1), (u, 2), (v, 2)):
        c = None if crop is None else [c // k for c in crop]
        turned.append(_reference_view(plane, c, rotate, flip))
    th, tw = turned[0].shape
    packed = np.concatenate([turned[0], turned[1].reshape(-1, tw), turned[2].reshape(-1, tw)])
    return _frame(av.VideoFrame.from_ndarray(packed, format=src.format.name))


@pytest.mark.parametrize("fmt", ["yuv420p", "yuvj420p"])
@pytest.mark.parametrize("crop,rotate,flip", [(None, 180, "none"), (None, 0, "horizontal"), (None, 0, "vertical"),
                                              ((40, 20, 300, 170), 90, "none"), ((40, 20, 300, 170), 270, "vertical")])
def test_turned_views_read_the_pixels_of_a_clip_turned_beforehand(fmt: str, crop, rotate: int, flip: str) -> None:
    """Mirrored and turned views (even window edges) scale and warp exactly as the same
    frame turned before decoding: a model sees the same input either way."""
    src = _decoded(fmt)
    view = Preprocess(crop=list(crop) if crop else None, rotate=rotate, flip=flip)(_frame(src))
    ref = _turned_frame(src, crop, rotate, flip)
    assert (view.width, view.height) == (ref.width, ref.height)
    m = np.array([[0.4, 0.0, 3.0], [0.0, 0.4, 5.0]])  # a letterbox: scale and shift
    for out_fmt in ("bgr24", "rgb24"):
        assert np.array_equal(view.warped(m, 96, 64, out_fmt), ref.warped(m, 96, 64, out_fmt))
        assert np.array_equal(view.resized(61, 37, out_fmt), ref.resized(61, 37, out_fmt))


@pytest.mark.parametrize("fmt", ["yuv444p", "yuv422p", "bgra", "gray"])
@pytest.mark.parametrize("crop,rotate,flip", [(None, 180, "none"), (None, 90, "none"), (None, 0, "horizontal"),
                                              ((40, 20, 300, 170), 270, "vertical")])
def test_turned_views_of_decoder_frames_not_in_4_2_0_read_the_converted_picture_turned(
        fmt: str, crop, rotate: int, flip: str) -> None:
    """GIFs (bgra), 4:4:4 and 4:2:2 video have no 4:2:0 planes to turn: the view turns the
    converted picture, and scales and warps as the same picture turned beforehand."""
    src = _decoded(fmt)
    view = Preprocess(crop=list(crop) if crop else None, rotate=rotate, flip=flip)(_frame(src))
    ref = Frame.from_image(_reference_view(src.to_ndarray(format="bgr24"), crop, rotate, flip), "t", 0)
    m = np.array([[0.4, 0.0, 3.0], [0.0, 0.4, 5.0]])
    for out_fmt in ("bgr24", "rgb24"):
        assert np.array_equal(view.warped(m, 96, 64, out_fmt), ref.warped(m, 96, 64, out_fmt))
        assert np.array_equal(view.resized(64, 48, out_fmt), ref.resized(64, 48, out_fmt))


def test_scaled_view_from_planes_and_from_a_converted_frame() -> None:
    """Scaling (a 1280x720 frame analysed at 640x360 after a crop and a turn), from the
    planes and from a frame whose BGR image exists (the runtime converted it)."""
    src = _decoded(w=1280, h=720)
    full = src.to_ndarray(format="bgr24")
    stage = Preprocess(crop=[0.25, 0.0, 1.0, 1.0], rotate=270, height=640)
    ref = cv2.resize(_reference_view(full, (320, 0, 1280, 720), 270, "none"), (480, 640),
                     interpolation=cv2.INTER_LINEAR)
    from_planes = stage(_frame(src))
    converted = _frame(src)
    converted.image()
    from_image = stage(converted)
    assert (from_planes.width, from_planes.height) == (480, 640)  # width follows the aspect ratio
    for view in (from_planes, from_image):  # the full-size view: scaled from planes / cut from BGR
        mean, p99 = _diff(view.image(), ref)
        assert mean < 2.0 and p99 <= 8, (mean, p99)
        want = cv2.resize(_reference_view(full, (320, 0, 1280, 720), 270, "none"), (90, 160),
                          interpolation=cv2.INTER_LINEAR)
        mean, p99 = _diff(view.resized(90, 160), want)
        assert mean < 2.0 and p99 <= 12, (mean, p99)


def test_chained_views_compose() -> None:
    """A crop of a turned view equals turning the crop the first view's pixels describe."""
    src = _decoded()
    full = src.to_ndarray(format="bgr24")
    first = Preprocess(rotate=90)
    second = Preprocess(crop=[10, 50, 170, 250], flip="horizontal")
    view = second(first(_frame(src)))
    assert isinstance(view, TransformedFrame) and view.source is not None
    ref = _reference_view(_reference_view(full, None, 90, "none"), (10, 50, 170, 250), 0, "horizontal")
    assert np.array_equal(view.image(), ref)
    view.detections = Detections(xyxy=[[0, 0, 160, 200]], score=[1.0], label="all")
    # the whole second view is the first view's [10, 170) x [50, 250), i.e. rows 10..170 of the frame
    assert np.allclose(view.original().detections.xyxy, [[50, 10, 250, 170]])


POLY = np.array([[60, 40], [200, 50], [150, 140]], np.float64)


def _distance(poly: np.ndarray, w: int, h: int, scale: float = 1.0) -> np.ndarray:
    """Signed distance (frame pixels, > 0 inside) from each pixel centre of a (h, w) plane of
    ``scale`` x the frame's size to the polygon's edge."""
    ys, xs = np.mgrid[0:h, 0:w]
    centres = np.stack([(xs + 0.5) / scale, (ys + 0.5) / scale], -1).reshape(-1, 2)
    path = poly.astype(np.float32).reshape(-1, 1, 2)
    return np.array([cv2.pointPolygonTest(path, (float(x), float(y)), True) for x, y in centres]).reshape(h, w)


def _inside(poly: np.ndarray, w: int, h: int, scale: float = 1.0) -> np.ndarray:
    """Pixels wholly inside the polygon (the part that must be black)."""
    return _distance(poly, w, h, scale) > 0.75 / scale


@pytest.mark.parametrize("fmt", ["yuv420p", "yuvj420p"])
def test_masks_fill_the_decoder_planes_on_a_copy(fmt: str) -> None:
    src = _decoded(fmt)
    before = [np.frombuffer(p, np.uint8).copy() for p in src.planes]
    out = masked(_frame(src), [POLY])
    assert out.av_frame is not src and out.av_frame.format.name == fmt and not out.has_image
    assert all(np.array_equal(np.frombuffer(p, np.uint8), b) for p, b in zip(src.planes, before))  # untouched
    y = np.frombuffer(out.av_frame.planes[0], np.uint8).reshape(H, -1)[:, :W]
    u = np.frombuffer(out.av_frame.planes[1], np.uint8).reshape(H // 2, -1)[:, :W // 2]
    black = 0 if fmt == "yuvj420p" else 16
    inside = _inside(POLY, W, H)
    assert (y[inside] == black).all() and (u[_inside(POLY, W // 2, H // 2, 0.5)] == 128).all()
    far = _distance(POLY, W, H) < -1.5
    y0 = np.frombuffer(src.planes[0], np.uint8).reshape(H, -1)[:, :W]
    assert np.array_equal(y[far], y0[far])  # the rest is the decoded picture
    assert out.image()[inside].max() <= 2  # and it converts to black


def test_masks_on_a_converted_frame_and_pool_reuse() -> None:
    frame = _frame(_decoded())
    image = frame.image().copy()
    pool = BufferPool()
    first = masked(frame, [POLY], pool)
    assert np.array_equal(frame.image(), image)  # the frame's own image is untouched
    assert first.has_image and first.av_frame is None
    assert (first.image()[_inside(POLY, W, H)] == 0).all()
    address = first.image().ctypes.data
    second = masked(frame, [POLY], pool)
    assert second.image().ctypes.data != address  # still referenced by the first frame: not reused
    del first
    third = masked(frame, [POLY], pool)
    assert third.image().ctypes.data == address  # released: reused without a new allocation
    assert np.array_equal(third.image(), second.image())


def test_original_maps_detections_back_and_shows_the_masks() -> None:
    src = _decoded()
    stage = Preprocess(crop=[100, 0, 320, 180], rotate=90, masks=[[[0, 0], [60, 0], [60, 60], [0, 60]],
                                                                  [[110, 10], [150, 10], [150, 40]]])
    frame = _frame(src)
    frame.detections = Detections(xyxy=[[120, 20, 160, 60]], score=[0.5], label="before")
    view = stage(frame)
    assert (view.width, view.height) == (180, 220)
    # detections made before the stage are carried into the view's pixels
    assert np.allclose(view.detections.xyxy, [[180 - 60, 20, 180 - 20, 60]])
    view.detections = Detections.merge([view.detections,
                                        Detections(xyxy=[[10, 30, 50, 90]], score=[0.9], label="found")])
    original = view.original()
    assert (original.width, original.height) == (W, H)
    assert np.allclose(original.detections.xyxy, [[120, 20, 160, 60], [130, 130, 190, 170]])
    assert list(original.detections.label) == ["before", "found"]
    img = original.image()
    assert img[5:55, 5:55].max() <= 2  # outside the crop, still masked in the decoded frame
    assert img[12:20, 140:148].max() <= 2
    assert frame.image()[5:55, 5:55].max() > 50  # the incoming frame keeps its pixels


def test_masks_only_keep_the_frame_geometry() -> None:
    frame = _frame(_decoded())
    frame.detections = Detections(xyxy=[[1, 2, 3, 4]], score=[1.0], label="x")
    out = Preprocess(masks=[[[0.0, 0.0], [0.5, 0.0], [0.5, 0.5]]])(frame)  # fractions
    assert not isinstance(out, TransformedFrame) and (out.width, out.height) == (W, H)
    assert out.detections is frame.detections
    assert out.image()[5, 100].max() <= 2 and out.image()[80, 20].max() > 0  # inside / outside the triangle
    assert Preprocess()(frame) is frame  # nothing to do: the frame passes unchanged


@pytest.mark.parametrize("converted", [False, True])
def test_overlapping_masks_fill_their_overlap(converted: bool) -> None:
    frame = _frame(_decoded())
    if converted:
        frame.image()
    a = np.array([[20, 20], [120, 20], [120, 120], [20, 120]], np.float64)
    b = np.array([[80, 60], [200, 60], [200, 160], [80, 160]], np.float64)
    img = masked(frame, [a, b]).image()
    assert img[70:110, 90:110].max() <= 2  # inside both polygons
    assert img[30:50, 30:50].max() <= 2 and img[130:150, 150:190].max() <= 2  # inside one of them
    assert img[5:15, 250:310].max() > 50  # outside both
