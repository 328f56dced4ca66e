"""Inputs for the bench tests: a short synthetic OCR clip with its ground truth (no
shared assets needed) and the environment the ``vapipe`` command runs in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OCR_FRAMES = 8
#: a small detector input (the 640x360 clip scaled to 320x192): the chain stays quick
OCR_SMALL = "text_detect.options={limit_type: max, limit_side_len: 320}"


@pytest.fixture(scope="session")
def ticker(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(clip, truth): ``testsrc://ticker`` at 640x360, OCR_FRAMES frames of H.264."""
    from bench.clips import ticker_clip

    return ticker_clip(OCR_FRAMES, 640, 360, folder=tmp_path_factory.mktemp("ticker"))


@pytest.fixture(scope="session")
def bench_env() -> dict[str, str]:
    """This process's environment: models from ``VAPIPE_MODELS_DIR`` (the shared folder) or
    from the models the test session pulled."""
    env = dict(os.environ)
    env.pop("VAPIPE_DEBUG", None)
    return env
