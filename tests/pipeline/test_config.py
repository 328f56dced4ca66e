from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import ConfigError, load_config, load_pipeline, parse_config
from pipeline.overrides import apply_overrides
from pipeline.graph import build_graph

GOOD = """
pipelines:
  p:
    description: test
    stages:
      - name: src
        type: "pipeline.testing:ListSource"
      - name: sink
        type: "pipeline.testing:CollectSink"
"""


def test_valid_pipeline_parses_into_typed_specs() -> None:
    cfg = parse_config(GOOD, "t.yaml")
    spec = cfg.get("p")
    assert spec.description == "test"
    assert [s.name for s in spec.stages] == ["src", "sink"]


def test_unknown_stage_type_lists_known_types_and_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(GOOD.replace('"pipeline.testing:CollectSink"', "detekt"), "t.yaml")
    msg = str(err.value)
    assert msg.startswith("t.yaml:8:") and "'detekt'" in msg and "detect" in msg and "decode" in msg


def test_unknown_parameter_is_an_error_naming_it_and_valid_ones() -> None:
    text = GOOD.replace('type: "pipeline.testing:ListSource"', 'type: "pipeline.testing:ListSource"\n        params: {cont: 3}')
    with pytest.raises(ConfigError) as err:
        parse_config(text, "t.yaml")
    assert "unknown parameter 'cont'" in str(err.value) and "count" in str(err.value)


SINKS = """
pipelines:
  p:
    stages:
      - {{name: src, type: "pipeline.testing:ListSource"}}
      - {{name: a, {a}}}
      - {{name: b, {b}}}
"""
JSONL = 'type: metadata, params: {path: "o/x.jsonl"}'


@pytest.mark.parametrize(("a", "b", "clash"), [
    ("type: encode", "type: encode", True),                       # both {output}/{source}.mp4
    (JSONL, 'type: metadata, params: {path: "o/x.jsonl", format: json}', True),  # lines and an array
    ('type: encode, params: {path: "{output}/{name}.mp4"}',) * 2 + (False,),      # {name}: two files
    (JSONL, JSONL, False),                                         # JSON Lines records share a file
    ("type: metadata", "type: metadata, params: {format: json}", False),          # .jsonl and .json
])
def test_two_sinks_of_a_pipeline_writing_one_file_are_refused_when_the_file_is_read(a: str, b: str,
                                                                                   clash: bool) -> None:
    text = SINKS.format(a=a, b=b)
    if clash:
        with pytest.raises(ConfigError, match=r"^t\.yaml:7: pipeline 'p' stage 'b': writes the file stage 'a' "
                                              r"writes \('.*'\); give each its own path"):
            parse_config(text, "t.yaml")
    else:
        parse_config(text, "t.yaml")


def test_on_key_stays_a_string_not_a_yaml11_boolean() -> None:
    cfg = parse_config("pipelines:\n  p:\n    stages:\n      - {name: s, type: 'pipeline.testing:ListSource', "
                       "params: {uri: on}}\n", "t.yaml")
    assert cfg.get("p").stages[0].params["uri"] == "on"


def test_cycle_is_reported_as_its_path() -> None:
    text = """
pipelines:
  p:
    stages:
      - {name: src, type: "pipeline.testing:ListSource"}
      - {name: a, type: "pipeline.testing:CollectSink", inputs: [src, b]}
      - {name: b, type: "pipeline.testing:CollectSink", inputs: [a]}
"""
    spec = parse_config(text, "t.yaml").get("p")
    with pytest.raises(ConfigError, match=r"cycle: (a -> b -> a|b -> a -> b)"):
        build_graph(spec, "t.yaml")


def test_unknown_input_names_the_stages() -> None:
    text = GOOD.replace('type: "pipeline.testing:CollectSink"', 'type: "pipeline.testing:CollectSink"\n        inputs: [nope]')
    spec = parse_config(text, "t.yaml").get("p")
    with pytest.raises(ConfigError, match="input 'nope' is not a stage; stages: src, sink"):
        build_graph(spec, "t.yaml")


def test_missing_model_file_is_named() -> None:
    text = """
pipelines:
  p:
    stages:
      - {name: src, type: decode}
      - {name: det, type: detect, params: {model: /no/such/model.onnx, decoder: blazeface}}
"""
    with pytest.raises(ConfigError, match="/no/such/model.onnx"):
        parse_config(text, "t.yaml")


def test_invalid_yaml_cites_the_line() -> None:
    with pytest.raises(ConfigError, match=r"t.yaml:\d+: invalid YAML: expected the node content"):
        parse_config("pipelines:\n  p:\n    stages: [\n", "t.yaml")


@pytest.mark.parametrize("text, message", [
    ("pipelines:\n  p:\n    stages: [{name: a, type: decode}]\n  p:\n    stages: [{name: b, type: decode}]\n",
     r"^t.yaml:4: invalid YAML: duplicate key 'p' \(first on line 2\)$"),
    ("pipelines:\n  p:\n    stages: [{name: a, type: decode, params: {loop: true, loop: false}}]\n",
     r"^t.yaml:3: invalid YAML: duplicate key 'loop' \(first on line 3\)$"),
    ("version: 2\npipelines:\n  p:\n    stages: [{name: a, type: decode}]\n",
     r"^t.yaml: unknown top-level key 'version'; valid: pipelines$"),
    ("pipelines: {}\n", r"^t.yaml: 'pipelines' is empty"),
])
def test_what_yaml_would_take_silently_is_an_error(text: str, message: str) -> None:
    """YAML keeps the last of repeated keys and ignores keys nobody reads: here they are errors."""
    with pytest.raises(ConfigError, match=message):
        parse_config(text, "t.yaml")


def test_overrides_change_params_and_reject_unknown_ones() -> None:
    spec = parse_config(GOOD, "t.yaml").get("p")
    new = apply_overrides(spec, ["src.count=5"])
    assert new.stages[0].params["count"] == 5 and "count" not in spec.stages[0].params
    with pytest.raises(ConfigError, match="unknown parameter 'bogus'"):
        apply_overrides(spec, ["src.bogus=1"])
    with pytest.raises(ConfigError, match="no stage 'zzz'"):
        apply_overrides(spec, ["zzz.count=1"])


def test_an_override_can_set_one_key_of_a_mapping_parameter() -> None:
    spec = parse_config("pipelines:\n  p:\n    stages:\n      - {name: src, type: decode, params: "
                        "{uri: a.mp4, reconnect: {initial_s: 2.0}}}\n", "t.yaml").get("p")
    new = apply_overrides(spec, ["src.reconnect.max_attempts=3"])
    assert new.stages[0].params["reconnect"] == {"initial_s": 2.0, "max_attempts": 3}  # the other key stays
    assert spec.stages[0].params["reconnect"] == {"initial_s": 2.0}
    fresh = parse_config("pipelines:\n  p:\n    stages:\n      - {name: src, type: decode}\n", "t.yaml").get("p")
    from_default = apply_overrides(fresh, ["src.reconnect.jitter=0"]).stages[0].params["reconnect"]
    assert from_default["jitter"] == 0 and from_default["initial_s"] > 0  # the defaults of the other keys
    with pytest.raises(ConfigError, match=r"--set src.threads.x=1: src.threads is not a mapping"):
        apply_overrides(spec, ["src.threads.x=1"])
    with pytest.raises(ConfigError, match=r"--set src.nope.x=1: unknown parameter 'nope'; valid: uri, "):
        apply_overrides(spec, ["src.nope.x=1"])
    with pytest.raises(ConfigError, match=r"--set src.reconnect.bogus=1: unknown parameter"):
        apply_overrides(spec, ["src.reconnect.bogus=1"])


def test_an_unknown_nested_key_lists_the_keys_valid_there() -> None:
    """The keys of the mapping the unknown one is in, as the YAML spells them (not the stage's)."""
    spec = load_pipeline(Path(__file__).resolve().parents[2] / "pipelines.yaml", "people_counting", check_files=False)
    with pytest.raises(ConfigError, match=r"unknown parameter 'reconnect.bogus'; "
                                          r"valid: initial_s, max_s, jitter, max_attempts$"):
        apply_overrides(spec, ["decode.reconnect.bogus=1"])
    with pytest.raises(ConfigError, match=r"unknown parameter 'zones.z.colour'; valid: points, labels$"):
        apply_overrides(spec, ["counting.zones={z: {points: [[0, 0], [1, 0], [1, 1]], colour: red}}"])
    with pytest.raises(ConfigError, match=r"valid: path, .*\bschema, "):  # the alias, not the field's name
        apply_overrides(spec, ["metadata.ghost=1"])


def test_graph_renders_in_all_formats() -> None:
    graph = build_graph(parse_config(GOOD, "t.yaml").get("p"))
    assert "src --> sink" in graph.render("mermaid")
    assert '"src" -> "sink";' in graph.render("dot")
    assert "sink [pipeline.testing:CollectSink]  <- src" in graph.render("text")


def test_shipped_pipelines_file_is_valid(models_dir) -> None:
    """Every pipeline is well formed; those on catalogued models find them (the ones for models
    users bring are checked with those models in tests/pipeline/test_model_pipelines.py)."""
    cfg = load_config("pipelines.yaml", check_files=False)
    assert {"faces", "ocr", "persons"} <= set(cfg.pipelines)
    faces = [s.name for s in cfg.get("faces").stages]
    assert faces == ["decode", "face_detect", "landmarks", "encode", "metadata"]
    for spec in cfg.pipelines.values():
        build_graph(spec)
    for name in ("faces", "ocr", "persons"):
        assert load_pipeline("pipelines.yaml", name).name == name


def test_a_pipeline_whose_model_is_missing_stops_only_itself(tmp_path: Path) -> None:
    text = """
pipelines:
  ok:
    stages: [{name: decode, type: decode}]
  brought:
    stages:
      - {name: decode, type: decode}
      - {name: detect, type: detect, params: {model: nowhere/mine}}
"""
    path = tmp_path / "p.yaml"
    path.write_text(text)
    assert load_pipeline(path, "ok").name == "ok"
    with pytest.raises(ConfigError, match=r"p.yaml:\d+: pipeline 'brought' stage 'detect': model 'nowhere/mine' "
                                          r"is not in the catalogue.*--set detect.model=PATH"):
        load_pipeline(path, "brought")
