"""Progress of a run on stderr (``vapipe run``): frames, share done and FPS per source."""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["ConsoleProgress"]


class ConsoleProgress:
    """Frames and FPS per source on stderr: one updating line on a terminal,
    a line every few seconds otherwise."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.tty = sys.stderr.isatty()
        self.every_s = every_s if self.tty else 5.0
        self._last = time.monotonic()  # first report after one interval: quick failures stay one line
        self._shown = False

    def __call__(self, stats: list[Any]) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        parts = []
        for s in stats:
            total = f"/{s.total}" if s.total else ""
            pct = f" {100 * s.processed / s.total:3.0f}%" if s.total else ""
            parts.append(f"{s.source}: {s.processed}{total}{pct} {s.fps:.1f} fps")
        line = " | ".join(parts)
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line)
            self._shown = True
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
