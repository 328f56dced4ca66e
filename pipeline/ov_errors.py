"""OpenVINO exceptions as one readable line (shared by the engine and the device report)."""

from __future__ import annotations

__all__ = ["ov_reason", "one_line"]


def ov_reason(exc: BaseException) -> str:
    """The informative line of an OpenVINO exception (they start with source locations),
    at most 300 characters."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("Exception from", "Check '", "[ GENERAL_ERROR ]"))
              and "src/" not in ln]
    useful = useful or lines or [type(exc).__name__]
    # "FrontEnd API failed with OpConversionFailure:" says why on the next line
    reason = " ".join(useful[:2]) if useful[0].endswith(":") else useful[0]
    return reason[:300]


def one_line(exc: BaseException) -> str:
    """Any exception's message on one line: its first line, or an OpenVINO one's informative line."""
    text = str(exc).strip()
    if "\n" not in text:
        return text or type(exc).__name__
    return ov_reason(exc) if text.startswith("Exception from") else text.splitlines()[0]
