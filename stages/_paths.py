"""Output paths of sink stages.

Sinks take a path *template* such as ``"{output}/{source}.mp4"``; it is
formatted with

* ``output``: the stage's ``output_dir`` (set by the runtime; ``./output``
  when a stage is used on its own),
* ``source``: :func:`safe_name` of the stage's ``source_id``,
* ``name``: the stage's name.

A path that is a file a source of the process reads (the stage's ``source_uri``, set by
the runtime, or any file a video source has open: :func:`reading`) is refused: writing it
would destroy the input while it is read.  A sink
:func:`claim` s its file while it writes it: two sinks of one process may share a
file only where both share it by design (JSON Lines of several cameras); an MP4
and a JSON file, or two MP4s, on one path are refused in one line naming both.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator

from pipeline.outputs import may_share
from pipeline.stage import StageError

__all__ = ["PathTemplate", "safe_name", "check_output", "resolve_output", "claim", "release", "owner_name",
           "reading", "done_reading", "DEFAULT_OUTPUT_DIR"]

DEFAULT_OUTPUT_DIR = Path("output")
_MAX_LEN = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(source_id: str) -> str:
    """A file-name-safe, credential-free form of a source id.

    Characters other than ``[A-Za-z0-9._-]`` become ``_``; user and password
    of URLs (``rtsp://user:pass@host/...``) are dropped; names longer than 80
    characters are shortened and end in a hash of the full id so they stay
    distinct.  Different ids may map to the same name (``"cam 1"`` and
    ``"cam/1"``); give cameras distinct plain names to avoid that.
    """
    text = str(source_id)
    if "://" in text:
        parts = urlsplit(text)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}_{parts.port}"
        text = "_".join(p for p in (parts.scheme, host, parts.path, parts.query) if p)
    name = re.sub(r"__+", "_", _UNSAFE.sub("_", text)).strip("._-")
    if len(name) > _MAX_LEN:
        digest = hashlib.sha1(str(source_id).encode()).hexdigest()[:8]
        name = f"{name[:_MAX_LEN - 9]}-{digest}"
    return name or "source"


_CLAIMS: dict[str, tuple[str | None, dict[int, str]]] = {}  # real path -> (sharing kind, {id(sink): its name})
_CLAIMS_LOCK = threading.Lock()


_READ: dict[str, int] = {}  # real path of a file video sources read -> how many read it


def reading(path: str) -> str:
    """Note that a source has the local file ``path`` open for reading; sinks refuse to write
    it until :func:`done_reading` is called with the key returned."""
    key = os.path.realpath(path)
    with _CLAIMS_LOCK:
        _READ[key] = _READ.get(key, 0) + 1
    return key


def done_reading(key: str) -> None:
    """The source that :func:`reading` returned ``key`` to has closed its file."""
    with _CLAIMS_LOCK:
        left = _READ.pop(key, 0) - 1
        if left > 0:
            _READ[key] = left


def _refuse_an_input(path: Path, stage: Any, source: str = "") -> None:
    """StageError if ``path`` is the stage's ``source`` or a file a source has open."""
    local = Path(source[len("file://"):] if source.startswith("file://") else source) if source else None
    read = (local is not None and path.exists() and local.is_file() and path.samefile(local)) \
        or os.path.realpath(path) in _READ
    if read:
        raise StageError(f"{getattr(stage, 'name', 'stage')}: output {path} is the source being read "
                         f"({source or path}); write elsewhere (--output, or the stage's path)")


def claim(path: Path, stage: Any, shared_as: str | None = None) -> None:
    """Mark ``path`` as written by ``stage``, or raise StageError naming the sink that writes it
    already, or the source that reads it.  ``shared_as``: sinks claiming the path with the same
    value share it (None: the file is the stage's alone)."""
    _refuse_an_input(path, stage)
    key = os.path.realpath(path)
    with _CLAIMS_LOCK:
        kind, owners = _CLAIMS.get(key, (shared_as, {}))
        others = sorted(name for sink, name in owners.items() if sink != id(stage))
        if others and not may_share(shared_as, kind):
            raise StageError(f"{getattr(stage, 'name', 'stage')}: {path} is already written by {others[0]}; "
                             "give each output its own path (e.g. {output}/{source}-{name}.EXT)")
        _CLAIMS[key] = (kind, {**owners, id(stage): owner_name(stage)})


def release(path: Path, stage: Any) -> None:
    """``stage`` no longer writes ``path``."""
    key = os.path.realpath(path)
    with _CLAIMS_LOCK:
        kind, owners = _CLAIMS.get(key, (None, {}))
        owners = {sink: name for sink, name in owners.items() if sink != id(stage)}
        if owners:
            _CLAIMS[key] = (kind, owners)
        else:
            _CLAIMS.pop(key, None)


def owner_name(stage: Any) -> str:
    """How a sink is named in a clash: ``stage 'NAME' of source 'ID'``."""
    return f"stage {getattr(stage, 'name', '?')!r} of source {getattr(stage, 'source_id', '') or '?'!r}"


def _format(template: str, output: str, source: str, name: str) -> str:
    """``template`` with its fields filled; ValueError naming the valid fields."""
    try:
        return template.format(output=output, source=source, name=name)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"bad path template {template!r} ({exc!r}); valid fields: {{output}}, {{source}}, "
                         "{name}") from None


def _template(template: str) -> str:
    _format(template, "out", "cam", "sink")
    return template


#: a sink's ``path`` parameter: a template checked when the pipeline file is read
PathTemplate = Annotated[str, AfterValidator(_template)]


def check_output(template: str, stage: Any) -> Path:
    """The path ``template`` gives ``stage``, checked without creating anything, so that a sink
    fails on open rather than at its first frame, after other sinks have written theirs:
    StageError when the template is bad, the path is a folder or the file being read, or no
    file can be created where it points."""
    name = getattr(stage, "name", "stage")
    output_dir = getattr(stage, "output_dir", None) or DEFAULT_OUTPUT_DIR
    try:
        path = Path(_format(template, str(output_dir), safe_name(getattr(stage, "source_id", "")), name))
    except ValueError as exc:
        raise StageError(f"{name}: {exc}") from None
    if path.is_dir():
        raise StageError(f"{name}: output {path} is a folder; give a file name (path: {template!r})")
    _refuse_an_input(path, stage, str(getattr(stage, "source_uri", "") or ""))
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise StageError(f"{name}: cannot write {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StageError(f"{name}: cannot write {path}: {folder} is not writable")
    return path


def resolve_output(template: str, stage: Any) -> Path:
    """:func:`check_output`'s path for ``stage``, its folder created."""
    path = check_output(template, stage)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StageError(f"{getattr(stage, 'name', 'stage')}: cannot write {path}: "
                         f"{exc.strerror or exc} ({exc.filename or path.parent})") from None
    return path
