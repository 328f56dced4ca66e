"""Credentials kept out of sight: user names and passwords of camera URLs
(``rtsp://user:pass@host/...``) become ``***`` in messages, logs and records."""

from __future__ import annotations

import logging
import re

__all__ = ["redact", "RedactingFilter"]

_SECRETS = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)([^/@\s]*@)")


def redact(text: str) -> str:
    """``text`` with the user:password part of every URL replaced by ``***``."""
    return _SECRETS.sub(lambda m: f"{m.group(1)}***@", str(text))


class RedactingFilter(logging.Filter):
    """Log filter: user:password of URLs in a record's message become ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is left to the handler
            return True
        clean = redact(text)
        if clean != text:
            record.msg, record.args = clean, ()
        return True
