"""Benchmark inputs made on the fly (nothing large is stored in the repository):
shared clips scaled to 720p/1080p H.264, and ``testsrc://ticker`` text scenes encoded
with their ground truth.  Clips are cached in ``$VAPIPE_BENCH_CACHE``
(default ``~/.cache/vapipe/bench``)."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

__all__ = ["CACHE", "shared_dir", "scaled_clip", "ticker_clip"]

CACHE = Path(os.environ.get("VAPIPE_BENCH_CACHE", Path.home() / ".cache" / "vapipe" / "bench"))


def shared_dir() -> Path:
    """The shared assets (clips, models): ``$VAPIPE_SHARED``, else ``../shared`` next to this checkout."""
    return Path(os.environ.get("VAPIPE_SHARED", Path(__file__).resolve().parents[2] / "shared")).resolve()


def _encoder(dst: object, rate: Fraction, width: int, height: int, crf: int) -> object:
    stream = dst.add_stream("libx264", rate=rate)  # type: ignore[attr-defined]
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = {"preset": "veryfast", "crf": str(crf)}
    return stream


def scaled_clip(name: str, frames: int = 400, width: int = 1920, height: int = 1080, start: int = 0,
                videos: Path | None = None) -> Path:
    """Shared clip ``name`` from its frame ``start`` on, scaled to ``width`` x ``height`` H.264
    (libx264, yuv420p), ``frames`` frames long (short sources such as GIFs start again), cached."""
    import av

    src_path = (videos or shared_dir() / "data" / "videos") / name
    if not src_path.is_file():
        raise FileNotFoundError(f"bench clip source not found: {src_path} (set VAPIPE_SHARED)")
    out_path = CACHE / f"{Path(name).stem}-{width}x{height}-{frames}{f'-from{start}' if start else ''}.mp4"
    if out_path.is_file():
        return out_path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".part.mp4")
    with av.open(str(src_path)) as src, av.open(str(tmp), "w") as dst:
        in_stream = src.streams.video[0]
        rate = Fraction(in_stream.average_rate or 10).limit_denominator(1000)
        stream = _encoder(dst, rate, width, height, 23)
        n = skip = 0
        while n < frames:
            got = 0
            for frame in src.decode(in_stream):
                if skip < start:
                    skip += 1
                    continue
                big = frame.reformat(width=width, height=height, format="yuv420p")
                big.pts = n
                big.time_base = 1 / rate
                for packet in stream.encode(big):
                    dst.mux(packet)
                n += 1
                got += 1
                if n >= frames:
                    break
            if got == 0:
                break
            src.seek(0, stream=in_stream)
        for packet in stream.encode(None):
            dst.mux(packet)
    tmp.replace(out_path)
    return out_path


def ticker_clip(frames: int = 100, width: int = 1280, height: int = 720, seed: int = 0,
                folder: Path | None = None) -> tuple[Path, Path]:
    """``testsrc://ticker`` (moving signs, plates, prices; see :mod:`stages.testsrc`) encoded
    as H.264 at 25 fps, and its ground truth: a JSON file ``{"source": URI, "frames": [[{"text",
    "box"}, ...], ...]}`` with the lines fully visible in each frame.  Returns (clip, truth)."""
    import av

    from stages.testsrc import TickerScene

    folder = folder or CACHE
    stem = f"ticker-{width}x{height}-seed{seed}-{frames}"
    clip, truth = folder / f"{stem}.mp4", folder / f"{stem}.truth.json"
    if clip.is_file() and truth.is_file():
        return clip, truth
    folder.mkdir(parents=True, exist_ok=True)
    scene = TickerScene(width, height, fps=25.0, seed=seed)
    lines = []
    tmp = clip.with_suffix(".part.mp4")
    with av.open(str(tmp), "w") as dst:
        stream = _encoder(dst, Fraction(25), width, height, 18)
        for seq in range(frames):
            image, visible = scene.render(seq)
            lines.append([{"text": ln.text, "box": [float(v) for v in ln.box]} for ln in visible])
            frame = av.VideoFrame.from_ndarray(image, format="bgr24").reformat(format="yuv420p")
            frame.pts = seq
            frame.time_base = Fraction(1, 25)
            for packet in stream.encode(frame):
                dst.mux(packet)
        for packet in stream.encode(None):
            dst.mux(packet)
    truth.write_text(json.dumps({"source": f"testsrc://ticker?width={width}&height={height}&seed={seed}",
                                 "frames": lines}))
    tmp.replace(clip)
    return clip, truth
