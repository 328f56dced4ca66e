"""Requests checked against the machine before an instance is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.catalog import Catalog
from service.security import Guard

PIPELINES = """
pipelines:
  detecting:
    stages:
      - {{name: decode, type: decode}}
      - {{name: detector, type: detect, params: {{model: {model}, decoder: ssd}}}}
      - {{name: metadata, type: metadata}}
"""


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    import openvino as ov

    from pipeline.devices import tiny_model

    model = tmp_path / "tiny.xml"
    ov.save_model(tiny_model(), str(model))
    config = tmp_path / "pipelines.yaml"
    config.write_text(PIPELINES.format(model=model))
    return Catalog(config, Guard([tmp_path]))


def test_a_device_this_machine_lacks_is_refused_with_the_request(catalog: Catalog) -> None:
    import openvino as ov

    missing = next(d for d in ("NPU", "GPU", "GPU.1") if d not in ov.Core().available_devices)
    spec = catalog.get("detecting", "1")
    with pytest.raises(ValueError) as err:
        catalog.build(spec, {"detector.device": missing}, None, None, "i1")
    text = str(err.value)
    assert text.startswith("parameters.detector.device: ") and f"device {missing} not available" in text
    assert "available: " in text and "CPU" in text and "\n" not in text
    built = catalog.build(spec, {"detector.device": "CPU"}, None, None, "i2")  # present: accepted
    assert built.stage("detector").params["device"] == "CPU"


RECONNECTING = """
pipelines:
  cam:
    parameters: {tries: decode.reconnect.max_attempts}
    stages:
      - {name: decode, type: decode}
      - {name: metadata, type: metadata}
"""


@pytest.mark.parametrize("key, value, why", [
    ("tries", "many", "valid integer"),
    ("decode.reconnect.max_attempts", -3, "greater than or equal to 1"),
    ("decode.reconnect", {"max_attempts": -3}, "greater than or equal to 1"),
])
def test_a_bad_value_inside_a_mapping_parameter_names_the_request_field(tmp_path: Path, key: str, value: object,
                                                                        why: str) -> None:
    config = tmp_path / "pipelines.yaml"
    config.write_text(RECONNECTING)
    catalog = Catalog(config, Guard([tmp_path]))
    with pytest.raises(ValueError) as err:
        catalog.build(catalog.get("cam", "1"), {"decode.fps": 5, key: value}, None, None, "i1")
    text = str(err.value)
    assert text.startswith(f"parameters.{key}: ") and why in text, text
