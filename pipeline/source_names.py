"""Short names for sources: what outputs, summaries and frame records call a camera."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Collection

__all__ = ["source_ids"]


def source_ids(uris: list[str], taken: Collection[str] = ()) -> list[str]:
    """Short unique names for sources (file stem, scene name, host/path), none of them in
    ``taken`` (a second ``cam`` is ``cam-2``)."""
    out: list[str] = []
    for uri in uris:
        base = re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", uri).rstrip("/").split("?")[0]  # no user:password
        rest = base.split("://", 1)[-1]
        if "://" in base and "/" not in rest:  # a stream named by its address alone (udp://HOST:PORT)
            stem = rest.replace(":", "_")
        else:
            stem = Path(rest).stem or base.replace("://", "_")
        name, k = stem, 2
        while name in out or name in taken:
            name, k = f"{stem}-{k}", k + 1
        out.append(name)
    return out
