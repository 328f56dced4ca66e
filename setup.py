"""Build step beyond pyproject.toml: the repository's ``pipelines.yaml`` (the only copy)
is shipped as package data of ``pipeline`` (``pipeline/pipelines.yaml`` in the wheel),
so that an installed vapipe runs its pipelines from any directory.  The file is added
to build_py's data files, so wheels, sdists and strict editable installs all carry it;
a default (lenient) editable install reads the root file in place."""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("pipeline", "pipelines.yaml")  # (package, file in the project root)


class BuildPyWithPipelines(build_py):
    def _shipped(self) -> tuple[str, str, str, list[str]]:
        package, filename = SHIPPED
        return package, os.curdir, os.path.join(self.build_lib, package), [filename]

    def _get_data_files(self):  # wheels and editable installs
        return [*super()._get_data_files(), self._shipped()]

    def get_data_files_without_manifest(self):  # sdists
        return [*super().get_data_files_without_manifest(), self._shipped()]


setup(cmdclass={"build_py": BuildPyWithPipelines})
