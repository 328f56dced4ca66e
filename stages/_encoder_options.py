"""What an FFmpeg encoder accepts: its own options, and whether it opens without them (for
errors that name the option an encoder refused)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import av

__all__ = ["opens_without_options", "private_options", "shown"]


def opens_without_options(stream: Any, tb: Fraction) -> bool:
    """Whether ``stream``'s encoder opens at its size, pixel format and ``tb`` without private options."""
    probe = av.CodecContext.create(stream.codec_context.name, "w")
    probe.width, probe.height, probe.pix_fmt, probe.time_base = stream.width, stream.height, stream.pix_fmt, tb
    try:
        probe.open()
    except (av.FFmpegError, ValueError, TypeError):
        return False
    return True


def shown(options: dict[str, str]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in options.items())


def private_options(ctx: Any) -> set[str]:
    """Names of the encoder's own options (crf, preset, ...)."""
    try:
        return {o.name for o in ctx.supported_options.private}
    except AttributeError:  # older PyAV: assume the x264/x265 family
        return {"crf", "preset"} if ctx.name.startswith(("libx264", "libx265")) else set()
