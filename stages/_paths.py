"""Output paths of sink stages.

Sinks take a path *template* such as ``"{output}/{source}.mp4"``; it is
formatted with

* ``output``: the stage's ``output_dir`` (set by the runtime; ``./output``
  when a stage is used on its own),
* ``source``: :func:`safe_name` of the stage's ``source_id``,
* ``name``: the stage's name.

A path that is the file the stage's source reads (``source_uri``, set by the
runtime) is refused: writing it would destroy the input while it is read.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pipeline.stage import StageError

__all__ = ["safe_name", "resolve_output", "DEFAULT_OUTPUT_DIR"]

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


def resolve_output(template: str, stage: Any) -> Path:
    """Format ``template`` for ``stage`` and create the parent directory."""
    output_dir = getattr(stage, "output_dir", None) or DEFAULT_OUTPUT_DIR
    try:
        text = template.format(output=str(output_dir), source=safe_name(getattr(stage, "source_id", "")),
                               name=getattr(stage, "name", ""))
    except (KeyError, IndexError, ValueError) as exc:
        raise StageError(f"{getattr(stage, 'name', 'stage')}: bad path template {template!r} ({exc!r}); "
                         "valid fields: {output}, {source}, {name}") from exc
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    source = str(getattr(stage, "source_uri", "") or "")
    local = Path(source[len("file://"):] if source.startswith("file://") else source) if source else None
    if local is not None and path.exists() and local.is_file() and path.samefile(local):
        raise StageError(f"{getattr(stage, 'name', 'stage')}: output {path} is the source being read ({source}); "
                         "write elsewhere (--output, or the stage's path)")
    return path
