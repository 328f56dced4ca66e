"""Running a snippet in a fresh interpreter, where a first-use race inside a native library
has not been settled yet by earlier tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def finishes_without_deadlock(code: str, what: str, timeout: float = 60.0) -> None:
    """Run ``code`` with this interpreter from the project root: it must print ``ok`` and exit 0;
    not finishing within ``timeout`` seconds fails the test as a deadlock of ``what``."""
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                           check=False, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} deadlocked")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
