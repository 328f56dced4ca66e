"""The bench is a layer on top of the core: the core never imports it, and the peer
worker (run by another interpreter) imports none of vapipe's core."""

from __future__ import annotations

import subprocess
import sys

from bench.runner import ROOT

CORE_IMPORTS = """
import importlib, pkgutil, sys
import pipeline, stages, stages.models
for pkg in (pipeline, stages, stages.models):
    for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        if m.name != "pipeline.__main__":
            importlib.import_module(m.name)
print(sorted(n for n in sys.modules if n == "bench" or n.startswith("bench.")))
"""

PEER_IMPORTS = """
import sys
import bench.peers.worker, bench.peers.mediapipe_faces, bench.peers.rapidocr_text
print(sorted({n.split(".")[0] for n in sys.modules} & {"pipeline", "stages", "openvino", "cv2", "pydantic"}))
"""


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_core_does_not_import_bench() -> None:
    assert _run(CORE_IMPORTS) == "[]"


def test_peer_worker_imports_no_core() -> None:
    assert _run(PEER_IMPORTS) == "[]"
