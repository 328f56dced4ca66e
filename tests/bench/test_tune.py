"""``vapipe tune`` with a tiny budget writes an override file that ``vapipe run
--overrides`` accepts; bad override files are one-line errors naming the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.cli import one_error_line, vapipe


@pytest.fixture(scope="module")
def env(models_dir: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["VAPIPE_MODELS_DIR"] = str(models_dir)
    return e


def test_tune_writes_overrides_that_run_accepts(env: dict[str, str], clip: Path, tmp_path: Path) -> None:
    out = tmp_path / "overrides.yaml"
    proc = vapipe(env, "tune", "persons", "--source", clip, "--budget-s", 6, "--frames", 20, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "<- best" in proc.stdout
    data = yaml.safe_load(out.read_text())
    assert set(data) == {"decode", "person_detect"}
    assert set(data["person_detect"]) == {"requests", "hint", "config", "resize"}
    assert data["person_detect"]["hint"] in ("THROUGHPUT", "LATENCY")
    run = vapipe(env, "run", "persons", "--source", clip, "--overrides", out, "--max-frames", 5, "--json",
                 "--output", tmp_path / "run")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["sources"][0]["frames"] == 5


@pytest.mark.parametrize("text, expected", [
    ("nostage: {threads: 1}\n", "no stage 'nostage'"),
    ("person_detect: {bogus: 1}\n", "unknown parameter 'bogus'"),
    ("decode: {threads: -1}\n", "'threads'"),
    ("- just a list\n", "expected a mapping"),
])
def test_bad_override_file_is_one_line(env: dict[str, str], tmp_path: Path, text: str, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    line = one_error_line(vapipe(env, "run", "persons", "--source", "testsrc://bars", "--overrides", bad,
                                 "--max-frames", 2, "--output", tmp_path))
    assert str(bad) in line and expected in line, line


def test_missing_override_file(env: dict[str, str], tmp_path: Path) -> None:
    line = one_error_line(vapipe(env, "run", "persons", "--source", "testsrc://bars", "--overrides",
                                 tmp_path / "nope.yaml", "--output", tmp_path))
    assert "nope.yaml" in line
