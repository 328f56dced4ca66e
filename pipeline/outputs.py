"""Outputs of a run: every camera's sinks write files of their own (checked when cameras are
added, before any opens, so that no camera has written a frame when a clash is found; found at
the first frame instead, the first camera's file would be left with one frame), and a file the
sinks of several cameras share is started once per run (:class:`RunFiles`)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Iterable

__all__ = ["RunFiles", "check_distinct_outputs", "make_output_dir", "may_share"]


def may_share(sharing: str | None, other: str | None) -> bool:
    """Whether two sinks may write one file: only where both share files alike by design
    (:meth:`pipeline.stage.Stage.file_sharing`, e.g. JSON Lines records of one format)."""
    return sharing is not None and sharing == other


class RunFiles:
    """The files the sinks of one run have started.  A sink that starts a file the run started
    already adds to it: a camera whose first record comes after another camera's sink finished
    the shared file must not truncate that camera's records."""

    def __init__(self) -> None:
        self._started: set[str] = set()
        self._lock = threading.Lock()

    def first_start(self, path: Path) -> bool:
        """True for the run's first start of ``path`` (then written anew), False after."""
        key = os.path.realpath(path)
        with self._lock:
            first = key not in self._started
            self._started.add(key)
            return first


def check_distinct_outputs(cameras: Iterable[Any]) -> None:
    """ValueError naming both sinks if two sinks of ``cameras`` (each with ``source_id`` and
    ``stages``) would write one file and do not share files by design (JSON Lines records of
    one format do: :meth:`pipeline.stage.Stage.file_sharing`)."""
    seen: dict[str, tuple[str, str, str | None]] = {}
    for cam in cameras:
        for name, stage in cam.stages.items():
            try:
                path = stage.output_file()
            except Exception:  # noqa: BLE001 - a path that cannot be written: its open says so, as always
                continue
            if path is None:
                continue
            key = os.path.realpath(path)
            sharing = type(stage).file_sharing(stage.params)
            other = seen.get(key)
            if other is not None and not may_share(sharing, other[2]):
                raise ValueError(f"stage {name!r} of source {cam.source_id!r} would write {path}, which stage "
                                 f"{other[0]!r} of source {other[1]!r} writes; give each camera its own file "
                                 "({source} in the path)")
            seen[key] = (name, cam.source_id, sharing)


def make_output_dir(path: Path) -> bool:
    """Create the output directory (and its parents); whether it was made now; a one-line error
    naming it when it cannot be."""
    made = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ValueError(f"output directory {path}: a file of that name is in the way") from None
    except OSError as exc:
        raise ValueError(f"output directory {path}: cannot be created: {exc.strerror or exc}") from None
    return made
