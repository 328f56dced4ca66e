"""``make bench``'s rows: every row runs a shipped pipeline, and an f32 row forces f32 on
every model of it, in every mode (the baselines read it from the stages' config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chain import load_chain, load_spec
from bench.engine_modes import check_models, engine_mode
from bench.plan import BenchPlan
from bench.suite import ROWS, format_summary, main, without_f32_twins

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("row", ROWS, ids=[r.key for r in ROWS])
def test_row_runs_a_shipped_pipeline_with_valid_overrides(row, request: pytest.FixtureRequest) -> None:
    if row.pipeline == "objects":  # the YOLO model users bring: the shared folder's export
        request.getfixturevalue("shared_models_dir")
    chain = load_chain(load_spec(BenchPlan(pipeline=row.pipeline, config=str(ROOT / "pipelines.yaml"), source="",
                                           sets=list(row.sets))))
    precision = {p.stage: p.baseline_config.get("INFERENCE_PRECISION_HINT") for p in [chain.detect, *chain.regions]}
    if row.key.endswith("-f32"):
        assert set(precision.values()) == {"f32"}, precision
    else:
        assert set(precision.values()) == {None}, precision


def test_ocr_rows_also_run_vapipe_on_onnxruntime() -> None:
    rows = [r for r in ROWS if r.engine != "openvino"]
    assert {r.key for r in rows} == {"ocr-720p-f32", "ocr-720p"}
    for row in rows:   # the PP-OCR models are .onnx files: the mode is not refused
        chain = load_chain(load_spec(BenchPlan(pipeline=row.pipeline, config=str(ROOT / "pipelines.yaml"),
                                               source="", sets=list(row.sets))))
        check_models(engine_mode(row.engine), [chain.detect, *chain.regions])


def test_rows_cover_both_regimes() -> None:
    keys = [r.key for r in ROWS]
    assert len(keys) == len(set(keys))
    default = {(r.regime, r.pipeline) for r in ROWS if r.default}
    assert {("decode-bound", "persons"), ("decode-bound", "faces"), ("inference-bound", "persons"),
            ("inference-bound", "faces"), ("inference-bound", "ocr")} <= default
    assert any(r.cameras == 4 for r in ROWS if r.default and r.regime == "inference-bound")


def test_summary_line_per_row() -> None:
    res = {"modes": {"vapipe": {"fps": 80.0, "cpu_util": 0.97}},
           "ratios": {"vapipe/naive": 1.5, "vapipe/hand-tuned": 1.1, "vapipe/limit": 0.95,
                      "vapipe/vapipe-unplanned": 1.02, "vapipe/mediapipe": 2.4},
           "peers": {"mediapipe": {}},
           "checks": [{"check": "vapipe/hand-tuned >= 1.2", "value": 1.1, "ok": False},
                      {"check": "vapipe/naive >= 1.3", "value": 1.5, "ok": True}]}
    text = format_summary({"faces-720p": ("decode-bound", res)})
    line = text.splitlines()[1]
    assert line.startswith("faces-720p") and "1.50" in line and "2.40x mediapipe" in line and "97%" in line
    assert line.endswith("     -  below target: vapipe/hand-tuned")   # no vapipe-ort on this row
    res["ratios"]["vapipe-ort/vapipe"] = 0.71
    assert "2.40x mediapipe    0.71  below target" in format_summary({"ocr": ("inference-bound", res)})


def test_unknown_row(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--only", "persons-9"])
    assert "unknown row 'persons-9'" in capsys.readouterr().err


def test_a_default_precision_row_is_left_out_where_the_default_is_f32(capsys: pytest.CaptureFixture[str]) -> None:
    keys = [r.key for r in ROWS if r.default]
    assert "ocr-720p" in keys and "ocr-720p-f32" in keys
    assert without_f32_twins(keys, "bf16") == keys
    assert without_f32_twins(keys, "f32") == [k for k in keys if k != "ocr-720p"]
    assert "ocr-720p: left out" in capsys.readouterr().out
    assert without_f32_twins(["ocr-720p"], "f32") == ["ocr-720p"]  # asked for alone: runs


def test_a_failed_row_is_reported_and_the_run_goes_on(tmp_path, monkeypatch, capsys) -> None:
    """A mode that fails (or hangs past its timeout) in one row: the rows after it still run,
    summary.json (written after every row) names the error, and the run exits 1."""
    import json

    import bench.report
    import bench.runner
    import bench.suite
    from bench.plan import BenchError
    from bench.suite import Row

    made = []

    def clip(row: str):
        return lambda frames: made.append(frames) or (tmp_path / f"{row}-{frames}.mp4", None)

    monkeypatch.setattr(bench.suite, "ROWS", (Row("a", "decode-bound", "persons", clip("a")),
                                              Row("b", "decode-bound", "persons", clip("b"))))
    ran = []
    # row b runs for 1 s at 150 frames on this machine: it is made 4 times longer
    monkeypatch.setattr(bench.runner, "frames_for_run", lambda name, source, cameras, frames, min_run_s, *a:
                        (frames * 4, 1.0) if Path(source).name == "b-150.mp4" else (frames, 5.0))

    def fake_run_bench(name, source, **kw):
        ran.append(kw["out"].name)
        assert kw["frames"] == (600 if kw["out"].name == "b" else 150) and source.endswith(f"-{kw['frames']}.mp4")
        if kw["out"].name == "a":
            raise BenchError("bench mode 'naive' did not finish within 1800 s")
        return {"modes": {"vapipe": {"fps": 50.0, "cpu_util": 0.95}}, "ratios": {"vapipe/naive": 1.4},
                "checks": []}

    monkeypatch.setattr(bench.runner, "run_bench", fake_run_bench)
    monkeypatch.setattr(bench.report, "format_table", lambda res: "table")
    assert main(["--only", "a,b", "--out", str(tmp_path / "out")]) == 1
    assert ran == ["a", "b"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["a"] == {"error": "bench mode 'naive' did not finish within 1800 s"}
    assert summary["b"]["modes"]["vapipe"]["fps"] == 50.0
    out = capsys.readouterr().out
    assert "a: failed: bench mode 'naive' did not finish" in out
    assert made == [150, 150, 600] and "b: 150 frames per camera ran for 1.0 s here; 600 frames per camera" in out
    assert out.rstrip().splitlines()[-1].startswith("a                failed: bench mode 'naive'")
