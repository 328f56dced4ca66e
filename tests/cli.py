"""Running the real ``vapipe`` command line from tests, and checking how it failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli_env(models_dir: Path) -> dict[str, str]:
    """The process environment, with models read from ``models_dir``, no debug switch and
    no pipeline file chosen by the caller's environment."""
    env = dict(os.environ)
    env["VAPIPE_MODELS_DIR"] = str(models_dir)
    env.pop("VAPIPE_DEBUG", None)
    env.pop("VAPIPE_CONFIG", None)
    return env


def vapipe(env: dict[str, str], *args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m pipeline ARGS`` from the project root; raises TimeoutExpired on a hang."""
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The command failed and said why in exactly one line on stderr, without a traceback."""
    assert proc.returncode != 0, f"expected a failure, got exit 0\nstdout: {proc.stdout[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{proc.stderr}"
    assert lines[0].startswith("vapipe: error: "), lines[0]
    return lines[0]


def succeeded(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstderr: {proc.stderr}\nstdout: {proc.stdout[-2000:]}"
    return proc
