"""vapipe run's option checks (the command itself runs in tests/pipeline/test_cli.py)."""

from __future__ import annotations

import pytest

from pipeline.cli import CliError
from pipeline.cli_run import _device_sets
from pipeline.config import parse_config

PIPELINES = """
pipelines:
  find:
    stages:
      - {name: src, type: decode}
      - {name: faces, type: detect, params: {model: nowhere/face.xml, decoder: blazeface}}
      - {name: marks, type: classify, params: {model: nowhere/mesh.xml, decoder: face_landmarks, on: [face]}}
      - {name: meta, type: metadata}
"""


def test_device_goes_to_every_stage_with_a_model_and_a_cluster_checks_its_own_nodes() -> None:
    import openvino as ov

    spec = parse_config(PIPELINES, "t.yaml", check_files=False).get("find")
    assert _device_sets("CPU", spec) == ["faces.device=CPU", "marks.device=CPU"]
    if "GPU" not in ov.Core().available_devices:
        with pytest.raises(CliError, match="^--device GPU: device GPU not available"):
            _device_sets("GPU", spec)
    # the cameras of a cluster run on its nodes, which may have the GPU this machine lacks
    assert _device_sets("GPU", spec, on_this_machine=False) == ["faces.device=GPU", "marks.device=GPU"]
