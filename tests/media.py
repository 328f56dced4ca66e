"""Synthetic video for tests whose content does not matter (any picture would do).

Clips are the ``testsrc://`` scenes of :mod:`stages.testsrc` encoded with PyAV
(libx264, yuv420p, limited range, as cameras and most files are), so they need no
shared assets.  :func:`write_clip` makes one file; the session fixtures in
``tests/conftest.py`` make each clip once per test session (``make_clip``, ``clip``).
Tests whose content matters (faces against MediaPipe's references, people found by
the detector, OCR accuracy) keep reading the real clips of the shared folder.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

__all__ = ["ClipSpec", "CLIP", "write_clip", "write_images", "frames_of", "encode_images", "numbered_image",
           "picture_number", "write_numbered"]


@dataclass(frozen=True)
class ClipSpec:
    """What a synthetic clip looks like.

    ``gop``: frames from one keyframe to the next (closed GOPs, no scene-cut
    keyframes), so a stream cut every ``gop / fps`` seconds starts at a keyframe.
    ``faststart``: the MP4 index ('moov') before the media data ('mdat'); without it
    the index is written at the end, so a truncated copy cannot be opened.
    ``scene``: a ``testsrc://`` pattern (``ticker`` has text, ``bars`` and ``noise`` none).
    ``bframes``: B-frames between references (x264's default 3, as in most files).
    ``delays_cs``: GIF only, frame delays in centiseconds, repeated (default 100 / fps).
    """

    width: int = 432
    height: int = 240
    fps: int = 10
    frames: int = 120
    gop: int = 10
    faststart: bool = True
    scene: str = "ticker"
    seed: int = 7
    bframes: int = 3
    container: str = "mp4"
    delays_cs: tuple[int, ...] = ()

    def with_(self, **changes: object) -> "ClipSpec":
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def duration_s(self) -> float:
        return self.frames / self.fps

    def file_name(self, stem: str = "clip") -> str:
        """A name that tells the clips of one session apart (stem + every setting)."""
        flags = ("fs" if self.faststart else "nofs") + f"-b{self.bframes}" + "".join(f"-d{d}" for d in self.delays_cs)
        return (f"{stem}-{self.scene}{self.seed}-{self.width}x{self.height}-{self.fps}fps-{self.frames}f-"
                f"g{self.gop}-{flags}.{self.container}")


#: the default clip: 432x240 H.264, 10 fps, 12 s, a keyframe every second, text scene
CLIP = ClipSpec()


def scene_images(spec: ClipSpec) -> Iterator[np.ndarray]:
    """The clip's pictures before encoding: BGR uint8 (height, width, 3)."""
    from stages.testsrc import make_scene

    scene, _ = make_scene(f"testsrc://{spec.scene}?width={spec.width}&height={spec.height}&fps={spec.fps}"
                          f"&seed={spec.seed}")
    for i in range(spec.frames):
        yield scene.render(i)[0]


#: container -> (codec, pixel format); H.264 unless the container is one that cannot hold it
_CODECS = {"avi": ("mpeg4", "yuv420p"), "gif": ("gif", "rgb8")}


def encode_images(path: Path, images: Iterable[np.ndarray], fps: int, options: dict[str, str],
                  turn: tuple[int, bool, bool] = (0, False, False), sample_aspect: Fraction | None = None) -> Path:
    """BGR images (H, W, 3), all of one size, as an H.264 (libx264, yuv420p) file at ``fps``, with
    the encoder ``options`` (e.g. ``{"g": "25", "preset": "veryfast", "crf": "30"}``).  ``turn``:
    a display matrix (degrees counter-clockwise, then mirrored left-right, top-bottom: PyAV's
    ``set_display_rotation``) for players to apply; ``sample_aspect``: the pixels' width : height."""
    import av

    with av.open(str(path), "w") as out:
        stream = None
        for i, image in enumerate(images):
            if stream is None:
                stream = out.add_stream("libx264", rate=fps)
                stream.width, stream.height, stream.pix_fmt = image.shape[1], image.shape[0], "yuv420p"
                stream.options = dict(options)
                if turn != (0, False, False):
                    stream.set_display_rotation(turn[0], hflip=turn[1], vflip=turn[2])
                if sample_aspect is not None:
                    stream.codec_context.sample_aspect_ratio = sample_aspect
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            out.mux(stream.encode(frame))
        if stream is not None:
            out.mux(stream.encode(None))
    return path


def write_clip(path: Path, spec: ClipSpec = CLIP) -> Path:
    """Encode ``spec`` into ``path``: H.264 in MP4/MKV/TS, MPEG-4 part 2 in AVI, a GIF
    (frame delays are whole centiseconds: choose an ``fps`` that divides 100)."""
    import av

    options = {"movflags": "+faststart"} if spec.faststart and spec.container == "mp4" else {}
    codec, pix_fmt = _CODECS.get(spec.container, ("libx264", "yuv420p"))
    with av.open(str(path), "w", options=options) as out:
        stream = out.add_stream(codec, rate=Fraction(spec.fps))
        stream.width, stream.height, stream.pix_fmt = spec.width, spec.height, pix_fmt
        stream.gop_size = spec.gop
        if spec.delays_cs:
            stream.codec_context.time_base = Fraction(1, 100)
        if codec == "libx264":
            stream.options = {"preset": "veryfast", "crf": "23", "keyint_min": str(spec.gop), "sc_threshold": "0",
                              "bf": str(spec.bframes), "open_gop": "0"}
        elif codec == "mpeg4":
            stream.options = {"qscale": "4", "bf": "0"}
        delays = itertools.cycle(spec.delays_cs) if spec.delays_cs else None
        pts = 0
        for image in scene_images(spec):
            frame = _video_frame(image)
            if delays is not None:  # GIF frame delays: timestamps in centiseconds
                frame.pts, frame.time_base = pts, Fraction(1, 100)
                pts += next(delays)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def write_images(folder: Path, spec: ClipSpec, count: int, ext: str = "jpg") -> list[Path]:
    """The first ``count`` pictures of ``spec`` as image files ``frame_000.EXT`` ... in ``folder``."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, image in zip(range(count), scene_images(spec)):
        path = folder / f"frame_{i:03d}.{ext}"
        if not cv2.imwrite(str(path), image):
            raise OSError(f"cannot write {path}")
        paths.append(path)
    return paths


#: bars of a numbered picture: frame numbers 0 .. 2**NUMBER_BITS - 1
NUMBER_BITS = 10


def numbered_image(number: int, width: int = 80, height: int = 48) -> np.ndarray:
    """A BGR picture that shows ``number``: bar k (of ``NUMBER_BITS``, left to right) white
    for bit k set, black otherwise; it reads back after lossy coding (:func:`picture_number`)."""
    image = np.zeros((height, width, 3), np.uint8)
    bar = width // NUMBER_BITS
    for bit in range(NUMBER_BITS):
        if number >> bit & 1:
            image[:, bit * bar:(bit + 1) * bar] = 255
    return image


def picture_number(image: np.ndarray) -> int:
    """The number a :func:`numbered_image` shows (read from the middle of each bar)."""
    height, width = image.shape[:2]
    bar = width // NUMBER_BITS
    bits = (image[height // 4:3 * height // 4, bit * bar + 2:(bit + 1) * bar - 2].mean() > 127
            for bit in range(NUMBER_BITS))
    return sum(1 << k for k, on in enumerate(bits) if on)


def write_numbered(path: Path, frames: int, fps: Fraction | int = 10, gop: int = 10, codec: str = "libx264",
                   bframes: int = 3) -> Path:
    """Frames 0 .. ``frames`` - 1 as :func:`numbered_image` pictures in the container that ``path``'s
    suffix names, at ``fps``: a keyframe every ``gop`` frames (closed GOPs for H.264, open ones for
    MPEG-2 and MPEG-4 part 2) and ``bframes`` B-frames between references."""
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=Fraction(fps))
        stream.width, stream.height, stream.pix_fmt = 80, 48, "yuv420p"
        stream.gop_size = gop
        if codec == "libx264":
            stream.options = {"preset": "veryfast", "bf": str(bframes), "keyint_min": str(gop), "sc_threshold": "0"}
        else:
            stream.options = {"bf": str(bframes), "qscale": "4"}
        for i in range(frames):
            out.mux(stream.encode(_video_frame(numbered_image(i))))
        out.mux(stream.encode(None))
    return path


def frames_of(path: Path, count: int | None = None) -> list:
    """The first ``count`` (default: all) decoded frames of a file, as PyAV frames."""
    import av

    out = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            if count is not None and len(out) == count:
                break
            out.append(frame)
    return out


def _video_frame(image: np.ndarray):
    import av

    return av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
