"""Which pipeline file a command reads: --config, VAPIPE_CONFIG, ./pipelines.yaml, shipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import ConfigError
from pipeline.pipeline_file import ENV_VAR, find_pipeline_file, shipped_pipeline_file
from tests.cli import ROOT, cli_env, one_error_line, succeeded, vapipe

OTHER = "pipelines:\n  mine:\n    description: my own\n    stages:\n      - {name: decode, type: decode}\n"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory and no VAPIPE_CONFIG."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return work


def test_in_a_checkout_the_shipped_file_is_the_repository_file() -> None:
    assert shipped_pipeline_file() == ROOT / "pipelines.yaml"


def test_order_config_then_variable_then_current_directory_then_shipped(elsewhere: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = find_pipeline_file()
    assert (Path(chosen.path), chosen.origin) == (ROOT / "pipelines.yaml", "shipped with vapipe")
    (elsewhere / "pipelines.yaml").write_text(OTHER, encoding="utf-8")
    assert (find_pipeline_file().path, find_pipeline_file().origin) == ("pipelines.yaml", "current directory")
    env_file = tmp_path / "env.yaml"
    env_file.write_text(OTHER, encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(env_file))
    assert (find_pipeline_file().path, find_pipeline_file().origin) == (str(env_file), ENV_VAR)
    chosen = find_pipeline_file("given.yaml")  # --config wins, even before it is read
    assert (chosen.path, chosen.origin) == ("given.yaml", "--config")
    assert chosen.describe() == f"{elsewhere / 'given.yaml'} (--config)"


def test_variable_naming_a_missing_file_is_one_line(elsewhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "/no/such/pipelines.yaml")
    with pytest.raises(ConfigError) as err:
        find_pipeline_file()
    assert str(err.value) == f"pipeline file not found: /no/such/pipelines.yaml (from {ENV_VAR})"


def test_cli_list_says_which_file_it_read(models_dir: Path, tmp_path: Path) -> None:
    """``vapipe list`` with VAPIPE_CONFIG, and with --config, which wins over it."""
    env_file, flag_file = tmp_path / "env.yaml", tmp_path / "flag.yaml"
    env_file.write_text(OTHER, encoding="utf-8")
    flag_file.write_text(OTHER.replace("mine", "flagged"), encoding="utf-8")
    env = {**cli_env(models_dir), ENV_VAR: str(env_file)}
    assert succeeded(vapipe(env, "list")).stdout.splitlines() == [f"# from {env_file} ({ENV_VAR})",
                                                                 "mine  my own"]
    lines = succeeded(vapipe(env, "list", "--config", flag_file)).stdout.splitlines()
    assert lines == [f"# from {flag_file} (--config)", "flagged  my own"]
    line = one_error_line(vapipe({**env, ENV_VAR: str(tmp_path / "gone.yaml")}, "list"))
    assert line == f"vapipe: error: pipeline file not found: {tmp_path / 'gone.yaml'} (from {ENV_VAR})"
