"""vapipe's side of the peers: which peer fits a pipeline, where its interpreter is,
whether it has the peer installed, and what the peer worker is told."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.measure import file_sha256

__all__ = ["Peer", "PEERS", "peer_python", "peers_for", "unavailable_reason", "peer_settings"]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = ROOT / ".venv-peers"


@dataclass(frozen=True)
class Peer:
    """A framework users would use instead, for pipelines of one shape."""

    name: str                      # mode name
    requirement: str               # what to pip install
    module: str                    # what its interpreter must import
    detector: str                  # the detect stage's decoder it reproduces ...
    regions: tuple[str, ...]       # ... and the classify stages' decoders, in order
    target: float                  # vapipe FPS / peer FPS the project aims for
    description: str
    #: how its objects are matched with vapipe's: "boxes" (detector boxes), or "landmarks"
    #: (the bounding boxes of the landmarks, for peers that report no detector box)
    match_on: str = "boxes"


PEERS: dict[str, Peer] = {
    "mediapipe": Peer("mediapipe", "mediapipe==0.10.14", "mediapipe", "blazeface", ("face_landmarks",), 2.0,
                      "MediaPipe FaceMesh (solutions.face_mesh), the same two models, PyAV decoding", "landmarks"),
    "rapidocr": Peer("rapidocr", "rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime", "db_text",
                     ("text_direction", "text_recognition"), 3.0,
                     "RapidOCR on ONNX Runtime, the same three models, PyAV decoding"),
}


def peer_python(explicit: str | None = None) -> Path | None:
    """The peers' interpreter: ``explicit``, else ``$VAPIPE_PEERS_PYTHON``, else
    ``.venv-peers/bin/python`` of this checkout if it exists; None when there is none."""
    chosen = explicit or os.environ.get("VAPIPE_PEERS_PYTHON")
    if chosen:
        return Path(chosen)
    default = DEFAULT_VENV / "bin" / "python"
    return default if default.exists() else None


def peers_for(chain: Any) -> list[Peer]:
    """The peers that reproduce ``chain`` (a :class:`bench.chain.Chain`)."""
    regions = tuple(p.decoder for p in chain.regions)
    return [p for p in PEERS.values() if p.detector == chain.detect.decoder and p.regions == regions]


@lru_cache(maxsize=None)
def unavailable_reason(python: str | None, module: str) -> str | None:
    """Why the peer module cannot run under ``python`` (None if it can)."""
    if python is None:
        return f"no peer interpreter ({DEFAULT_VENV.name} not found; make peers, or set VAPIPE_PEERS_PYTHON)"
    if not Path(python).exists():
        return f"peer interpreter not found: {python}"
    try:
        proc = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True, timeout=120,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} cannot import {module}: {exc}"
    if proc.returncode != 0:
        err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return f"{python} cannot import {module}: {err[-1] if err else f'exit {proc.returncode}'}"
    return None


def peer_settings(peer: Peer, chain: Any, max_objects: int) -> dict[str, Any]:
    """What the peer worker needs: vapipe's model files (and their SHA-256, to show the
    peer ran the same models), decoder threads, and for face meshes the number of faces."""
    models = [chain.detect, *chain.regions]
    settings: dict[str, Any] = {"name": peer.name, "decode_threads": chain.decode_threads,
                                "models": {m.stage: str(m.path) for m in models},
                                "sha256": {m.stage: file_sha256(m.path) for m in models}}
    if peer.name == "mediapipe":
        settings["max_faces"] = max(1, max_objects)
    return settings
