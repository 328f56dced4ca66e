"""Fixtures of the core's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.testing import COLLECTED


@pytest.fixture(autouse=True)
def empty_collect_sinks() -> Iterator[None]:
    """Every test starts with no frames in :data:`pipeline.testing.COLLECTED`: the test sinks keep
    them module-wide, by sink and source, and another test's cameras would otherwise still be there."""
    COLLECTED.clear()
    yield
