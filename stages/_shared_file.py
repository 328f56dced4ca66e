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
        if array and append and _reopen_array(path):
            self._file: IO[str] = open(path, "a", encoding="utf-8")
            self.records = 1 if path.stat().st_size > len("[\n") else 0  # the next record needs a comma
        else:
            self._file = open(path, "a" if append and not array else "w", encoding="utf-8")
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


def _reopen_array(path: Path) -> bool:
    """Cut the closing ``]`` off the JSON array a sink of this run finished in ``path``, so that
    more records follow; False if the file holds no closed array (it is then written anew)."""
    try:
        with open(path, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - 16))
            tail = fh.read()
            end = tail.rstrip().rfind(b"]")
            if not tail.rstrip().endswith(b"]") or end < 0:
                return False
            cut = size - len(tail) + end
            fh.seek(0)
            if fh.read(1) != b"[":
                return False
            fh.truncate(cut - 1 if cut and tail[end - 1:end] == b"\n" else cut)
            return True
    except OSError:
        return False
