"""Which pipeline file a command reads.

In order: the ``--config`` argument, the ``VAPIPE_CONFIG`` environment variable,
``pipelines.yaml`` in the current directory, and the pipelines shipped with vapipe
(package data of an installed wheel; the repository's root ``pipelines.yaml`` in a
source checkout or an editable install, where the build has not copied it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .config import DEFAULT_CONFIG, ConfigError

__all__ = ["ENV_VAR", "PipelineFile", "find_pipeline_file", "shipped_pipeline_file"]

ENV_VAR = "VAPIPE_CONFIG"
SHIPPED = "shipped with vapipe"


@dataclass(frozen=True)
class PipelineFile:
    """``path`` as given (relative paths stay relative, so errors quote what the user typed);
    ``origin`` says where it came from: ``--config``, ``VAPIPE_CONFIG``, ``current directory``
    or ``shipped with vapipe``."""

    path: str
    origin: str

    def describe(self) -> str:
        """``/abs/path/pipelines.yaml (origin)``: one line for ``vapipe list``."""
        return f"{Path(self.path).resolve()} ({self.origin})"


def shipped_pipeline_file() -> Path | None:
    """The pipelines that come with vapipe, or None if this installation has none."""
    packaged = resources.files("pipeline").joinpath(DEFAULT_CONFIG)
    if packaged.is_file():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[1] / DEFAULT_CONFIG
    return checkout if checkout.is_file() else None


def find_pipeline_file(explicit: str | os.PathLike[str] | None = None) -> PipelineFile:
    """The pipeline file to read (see the module docstring for the order).

    Raises :class:`ConfigError` (one line) if ``VAPIPE_CONFIG`` names a missing file or
    no file is found at all; a missing ``--config`` file is reported when it is read.
    """
    if explicit:
        return PipelineFile(str(explicit), "--config")
    env = os.environ.get(ENV_VAR)
    if env:
        if not Path(env).is_file():
            raise ConfigError(f"pipeline file not found: {env} (from {ENV_VAR})")
        return PipelineFile(env, ENV_VAR)
    if Path(DEFAULT_CONFIG).is_file():
        return PipelineFile(DEFAULT_CONFIG, "current directory")
    shipped = shipped_pipeline_file()
    if shipped is None:
        raise ConfigError(f"no pipeline file: ./{DEFAULT_CONFIG} not found and this installation ships none; "
                          f"give --config FILE or set {ENV_VAR}")
    return PipelineFile(str(shipped), SHIPPED)
