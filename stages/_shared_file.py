"""Output files that several sink instances in one process write together.

Two cameras (or two server instances) whose sinks resolve to the same path
share one handle: records are written whole, under one lock, so lines never
interleave mid-record.  The first user opens the file (truncating it, unless
``append``); the last one to release it closes it.  A ``json`` file is one JSON
array: ``[`` on open, records separated by commas, ``]`` when the last user
releases it (the file is valid JSON once closed).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

__all__ = ["SharedFile"]

_REGISTRY: dict[str, "SharedFile"] = {}
_REGISTRY_LOCK = threading.Lock()


class SharedFile:
    def __init__(self, path: Path, append: bool, array: bool) -> None:
        self.path = path
        self.array = array
        self.lock = threading.Lock()
        self.users = 0
        self.records = 0
        self._file: IO[str] = open(path, "a" if append and not array else "w", encoding="utf-8")
        if array:
            self._file.write("[\n")

    @classmethod
    def acquire(cls, path: Path, append: bool = False, array: bool = False) -> SharedFile:
        key = os.path.realpath(path)
        with _REGISTRY_LOCK:
            shared = _REGISTRY.get(key)
            if shared is None:
                shared = _REGISTRY[key] = cls(path, append, array)
            shared.users += 1
            return shared

    def write(self, text: str, flush: bool) -> None:
        """Write one record (a JSON text without newline)."""
        with self.lock:
            f = self._file
            if f.closed:
                return
            if self.array:
                f.write((",\n" if self.records else "") + text)
            else:
                f.write(text + "\n")
            self.records += 1
            if flush:
                f.flush()

    def flush(self) -> None:
        with self.lock:
            if not self._file.closed:
                self._file.flush()

    def release(self) -> None:
        with _REGISTRY_LOCK:
            self.users -= 1
            if self.users > 0:
                self.flush()
                return
            _REGISTRY.pop(os.path.realpath(self.path), None)
        with self.lock:
            f = self._file
            if f.closed:
                return
            try:
                if self.array:
                    f.write("\n]\n")
                f.flush()
            finally:
                f.close()
