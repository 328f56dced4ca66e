"""Broken pipeline files through the real command line: exit 2 and one line on
stderr naming the file (the loader-level property is fuzzed in
``test_yaml_fuzz.py``; these are representative cases of each kind)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import ROOT, cli_env, one_error_line, vapipe

SHIPPED = (ROOT / "pipelines.yaml").read_text(encoding="utf-8")
STAGES = "pipelines:\n  p:\n    stages:\n"


BROKEN: dict[str, str | bytes] = {
    "tab-indented": SHIPPED.replace("      - name: person_detect", "\t- name: person_detect"),
    "binary-garbage": bytes(range(256)) * 4,
    "nul-bytes": SHIPPED.replace("description: People", "description: \x00People"),
    "empty": "",
    "only-a-comment": "# nothing here\n",
    "document-separators": "---\n...\n---\n",
    "list-at-top": "- pipelines\n- persons\n",
    "deep-nesting": "pipelines:\n  p: " + "[" * 5000 + "]" * 5000 + "\n",
    "recursive-alias": "pipelines: &a\n  p: *a\n",
    "undefined-alias": SHIPPED.replace("type: metadata", "type: *nowhere"),
    "stages-a-mapping": STAGES.replace("stages:\n", "stages: {decode: {type: decode}}\n"),
    "number-as-key": STAGES + "      - {name: decode, type: decode, 1: 2}\n",
    "line-key": STAGES + "      - {name: decode, type: decode, line: 3}\n",
    "empty-module-type": STAGES + "      - {name: decode, type: ':Decode'}\n",
    "relative-module-type": STAGES + "      - {name: decode, type: '.decode:Decode'}\n",
    "scalar-for-params": SHIPPED.replace("decoder: pose", "decoder: [pose, 1]"),
    "wrong-nesting": SHIPPED.replace("        params:\n          model: mediapipe/pose_detection",
                                     "        params:\n        model: mediapipe/pose_detection"),
    "duplicate-lines": SHIPPED.replace("      - name: metadata\n        type: metadata\n",
                                       "      - name: metadata\n        type: metadata\n" * 2),
    "deleted-source": SHIPPED.replace("      - name: decode\n        type: decode\n      - name: person_detect",
                                      "      - name: person_detect"),
    "cycle": STAGES + ("      - {name: decode, type: decode}\n"
                       "      - {name: a, type: metadata, inputs: [decode, b]}\n"
                       "      - {name: b, type: metadata, inputs: [a]}\n"),
    "newline-in-names": STAGES + ('      - {name: "de\\ncode", type: decode}\n'
                                  '      - {name: "de\\ncode", type: metadata}\n'),
    "very-long-model-path": SHIPPED.replace("model: mediapipe/pose_detection",
                                            "model: /" + "m" * 5000 + "/pose.tflite"),
    "very-long-string": SHIPPED.replace("type: metadata", "type: metadata\n        on_error: " + "s" * 200_000),
    "unicode-everywhere": SHIPPED.replace("persons:", "pérsönß\u202e\U0001f600:").replace(
        "name: metadata", "name: \u2028metadata"),
}


@pytest.fixture(scope="module")
def env(models_dir: Path) -> dict[str, str]:
    return cli_env(models_dir)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_validate_reports_a_broken_file_in_one_line(env, tmp_path: Path, case: str) -> None:
    path = tmp_path / f"{case}.yaml"
    content = BROKEN[case]
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    proc = vapipe(env, "validate", "--config", path, timeout=30)
    line = one_error_line(proc)
    assert proc.returncode == 2, proc.stderr
    assert str(path) in line
    if case == "very-long-string":
        assert len(line) < 1000, f"the value is quoted in full: {len(line)} characters"


@pytest.mark.parametrize("case", ["tab-indented", "deleted-source", "recursive-alias", "cycle"])
def test_run_reports_a_broken_file_in_one_line(env, tmp_path: Path, case: str) -> None:
    path = tmp_path / "pipelines.yaml"
    path.write_text(str(BROKEN[case]), encoding="utf-8")
    name = "p" if BROKEN[case].startswith(STAGES) else "persons"  # type: ignore[union-attr]
    proc = vapipe(env, "run", name, "--config", path, "--source", "testsrc://bars?frames=3",
                  "--output", tmp_path / "out", timeout=30)
    line = one_error_line(proc)
    assert proc.returncode == 2 and str(path) in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("model", ["/no/such/dir/pose.tflite", "/" + "m" * 5000 + "/pose.tflite"],
                         ids=["missing", "name-too-long"])
def test_run_with_a_bad_model_path_in_the_file_is_one_line(env, tmp_path: Path, model: str) -> None:
    """``run`` checks the pipeline's model files before anything starts, as ``validate`` does."""
    path = tmp_path / "pipelines.yaml"
    path.write_text(SHIPPED.replace("model: mediapipe/pose_detection", f"model: {model}"), encoding="utf-8")
    proc = vapipe(env, "run", "persons", "--config", path, "--source", "testsrc://bars?frames=3",
                  "--output", tmp_path / "out", timeout=30)
    line = one_error_line(proc)
    assert proc.returncode == 2 and model[:100] in line


def test_debug_shows_the_traceback(env, tmp_path: Path) -> None:
    path = tmp_path / "pipelines.yaml"
    path.write_text(str(BROKEN["tab-indented"]), encoding="utf-8")
    proc = vapipe(env, "--debug", "validate", "--config", path, timeout=30)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ConfigError" in proc.stderr


@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_an_output_directory_that_cannot_be_made_is_one_line(env, tmp_path: Path, where: str) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    out = tmp_path / where
    line = one_error_line(vapipe(env, "run", "persons", "--source", "testsrc://bars?frames=3", "--output", out))
    assert line.startswith(f"vapipe: error: output directory {out}: "), line
