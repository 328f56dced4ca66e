"""Make the peers' virtual environment: ``python -m bench.peers.install [DIR]`` (default ``.venv-peers``).

The peers are installed without their declared dependencies (MediaPipe 0.10.14 declares
jax, jaxlib, sounddevice and opencv-contrib-python, which ``solutions.face_mesh`` does not
import), then the packages they do import (``requirements.txt`` next to this file).
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

from .registry import DEFAULT_VENV, PEERS

__all__ = ["install"]

REQUIREMENTS = Path(__file__).with_name("requirements.txt")


def install(folder: Path = DEFAULT_VENV) -> Path:
    """Create ``folder`` with the peers installed; returns its interpreter."""
    venv.create(folder, with_pip=True, clear=folder.exists())
    python = folder / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", *(p.requirement for p in PEERS.values())], check=True)
    subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    print("peers installed; the dependencies pip may list as missing (jax, jaxlib, sounddevice, "
          "opencv-contrib-python) are not used by solutions.face_mesh", file=sys.stderr)
    return python


if __name__ == "__main__":
    print(install(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_VENV))
