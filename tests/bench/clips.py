"""Benchmark inputs made on the fly from the shared clips (nothing large is stored)."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

from tests.conftest import SHARED

CACHE = Path(os.environ.get("VAPIPE_BENCH_CACHE", Path.home() / ".cache" / "vapipe" / "bench"))


def clip_1080p(frames: int = 400, name: str = "one-by-one-person-detection.mp4") -> Path:
    """The shared clip upscaled to 1920x1080 H.264 (libx264, yuv420p), looped up to ``frames``, cached."""
    import av

    out_path = CACHE / f"{Path(name).stem}-1080p-{frames}.mp4"
    if out_path.is_file():
        return out_path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".part.mp4")
    with av.open(str(SHARED / "data" / "videos" / name)) as src, av.open(str(tmp), "w") as dst:
        in_stream = src.streams.video[0]
        rate = Fraction(in_stream.average_rate or 10).limit_denominator(1000)
        stream = dst.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        n = 0
        while n < frames:  # short sources (GIFs) loop until ``frames``
            got = 0
            for frame in src.decode(in_stream):
                big = frame.reformat(width=1920, height=1080, format="yuv420p")
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
