"""Benchmark inputs made on the fly from the shared clips (nothing large is stored)."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

from tests.conftest import SHARED

CACHE = Path(os.environ.get("VAPIPE_BENCH_CACHE", Path.home() / ".cache" / "vapipe" / "bench"))


def clip_1080p(frames: int = 400, name: str = "one-by-one-person-detection.mp4") -> Path:
    """The shared clip upscaled to 1920x1080 H.264 (libx264, yuv420p), looped up to ``frames``, cached."""
    return clip_scaled(name, 1920, 1080, frames)


def clip_scaled(name: str, width: int, height: int, frames: int = 400, pingpong: bool = False) -> Path:
    """The shared clip ``name`` scaled to ``width`` x ``height`` H.264 (libx264, yuv420p), looped up to
    ``frames``, cached.  ``pingpong`` plays it forwards, then backwards, and so on (motion stays
    continuous where a plain loop jumps; short clips only: their frames are held in memory)."""
    import av

    out_path = CACHE / f"{Path(name).stem}-{height}p-{frames}{'-pingpong' if pingpong else ''}.mp4"
    if out_path.is_file():
        return out_path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".part.mp4")
    with av.open(str(SHARED / "data" / "videos" / name)) as src, av.open(str(tmp), "w") as dst:
        in_stream = src.streams.video[0]
        rate = Fraction(in_stream.average_rate or 10).limit_denominator(1000)
        stream = dst.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        n = 0

        def put(frame: av.VideoFrame) -> None:
            nonlocal n
            big = frame.reformat(width=width, height=height, format="yuv420p")
            big.pts = n
            big.time_base = 1 / rate
            for packet in stream.encode(big):
                dst.mux(packet)
            n += 1

        if pingpong:
            source = [f.reformat(format="rgb24") for f in src.decode(in_stream)]
            cycle = source + source[-2:0:-1]
            while n < frames and cycle:
                put(cycle[n % len(cycle)])
        while n < frames and not pingpong:  # short sources (GIFs) loop until ``frames``
            got = 0
            for frame in src.decode(in_stream):
                put(frame)
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
