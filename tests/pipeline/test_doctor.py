"""``vapipe doctor``: every runtime's thread settings, the plan, and oversubscription warnings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("cores", "environment", "openvino ", "ffmpeg ", "opencv ", "numpy ", "onnxruntime", "torch", "plan")


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        full.pop(key, None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "pipeline", "doctor", *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=120)


def test_report_has_every_section_and_the_plan() -> None:
    res = doctor("--pipeline", "faces", "--cores", "4")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for section in SECTIONS:
        assert any(line.startswith(section) for line in lines), (section, res.stdout)
    assert "available devices: CPU" in res.stdout or "available devices:" in res.stdout
    assert "FULL_DEVICE_NAME" not in res.stdout  # shown as the device line
    assert "compiled CPU THROUGHPUT: NUM_STREAMS" in res.stdout
    assert "OPTIMAL_NUMBER_OF_INFER_REQUESTS" in res.stdout
    assert "threads: 4 cores" in res.stdout and "face_detect" in res.stdout and "landmarks" in res.stdout
    # the precision the plan measured best, where it chose f32 over this CPU's default
    for name in ("face_detect", "landmarks"):
        line = next(line for line in lines if line.startswith(f"  {name}: NUM_STREAMS="))
        assert ("INFERENCE_PRECISION_HINT=f32" in line) == (" at f32 (" in _plan_line(lines, name)), line
    assert not any(line.startswith("warning:") for line in lines if "cores this process" not in line
                   and "OpenCV" not in line), res.stdout


def _plan_line(lines: list[str], stage: str) -> str:
    return next(line for line in lines if f" {stage} " in line and "ms/inference" in line)


def test_warns_when_omp_num_threads_exceeds_the_cores() -> None:
    res = doctor(env={"OMP_NUM_THREADS": "64"})
    assert res.returncode == 0, res.stderr
    assert "  OMP_NUM_THREADS=64" in res.stdout
    warnings = [line for line in res.stdout.splitlines() if line.startswith("warning:")]
    assert any("OMP_NUM_THREADS=64" in w and "oversubscription" in w for w in warnings), res.stdout


def test_warns_when_threads_the_user_set_exceed_the_cores(tmp_path: Path) -> None:
    config = tmp_path / "pipelines.yaml"
    config.write_text((ROOT / "pipelines.yaml").read_text().replace(
        "          decoder: pose\n", "          decoder: pose\n          config: {INFERENCE_NUM_THREADS: 4}\n"))
    res = doctor("--config", str(config), "--pipeline", "persons", "--cores", "2")
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stdout.splitlines() if line.startswith("warning: thread plan")]
    assert warnings and "person_detect" in warnings[0] and "2 cores" in warnings[0], res.stdout
    assert "person_detect" in res.stdout and "(set)" in res.stdout
    res = doctor("--pipeline", "persons", "--cores", "2")
    assert not any(line.startswith("warning: thread plan") for line in res.stdout.splitlines()), res.stdout


def test_json_report() -> None:
    res = doctor("--pipeline", "persons", "--json", env={"MKL_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert {"cores", "env", "openvino", "ffmpeg", "opencv", "blas", "plan", "warnings"} <= set(info)
    assert "CPU" in info["openvino"]["available_devices"]
    assert info["env"]["MKL_NUM_THREADS"] == "1"
    assert info["plan"]["pipeline"] == "persons" and "person_detect" in info["plan"]["infer"]
    assert info["opencv"]["threads"] >= 1
    assert info["ffmpeg"]["h264_decoder_defaults"]["thread_count"] == 0
    pools = info["blas"]["threadpools"]
    if isinstance(pools, list):  # threadpoolctl installed: each pool names the package that loaded it
        assert pools and all(p["owner"] and "/" not in p["owner"] for p in pools), pools
        assert "numpy" in {p["owner"] for p in pools}, pools


def test_library_pools_are_named_by_their_package() -> None:
    from pipeline.doctor import _pool_owner

    assert _pool_owner("/v/site-packages/numpy.libs/libscipy_openblas64_-32a4.so") == "numpy"
    assert _pool_owner("/v/site-packages/opencv_python.libs/libopenblasp-r0.so") == "opencv_python"
    assert _pool_owner("/usr/lib/x86_64-linux-gnu/libgomp.so.1") == "libgomp.so.1"


def test_shows_how_the_last_run_went_and_its_re_plan(tmp_path: Path, monkeypatch: Any) -> None:
    from pipeline.costs import CostCache, check_key

    costs = tmp_path / "costs.json"
    monkeypatch.setenv("VAPIPE_COST_CACHE", str(costs))
    CostCache().put(check_key("persons"), {"status": "ok: 97% of 2 cores busy", "observed": {}, "at": 0.0,
                                           "replanned": {"at_s": 5.02, "stages": {"person_detect": {"NUM_STREAMS": 2}},
                                                         "assumed": []}})
    res = doctor("--pipeline", "persons", "--cores", "2", env={"VAPIPE_COST_CACHE": str(costs)})
    assert res.returncode == 0, res.stderr
    assert "  last run: ok: 97% of 2 cores busy" in res.stdout
    assert "  last run re-planned at 5.02 s: {'person_detect': {'NUM_STREAMS': 2}}" in res.stdout, res.stdout


def test_a_missing_source_is_refused_and_an_unreadable_one_named_in_the_plan(tmp_path: Path) -> None:
    missing = tmp_path / "nope.mp4"
    res = doctor("--pipeline", "persons", "--source", str(missing))
    assert res.returncode == 2 and res.stderr.strip() == f"vapipe: error: --source {missing}: not found", res.stderr
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n")
    res = doctor("--pipeline", "persons", "--source", str(text))
    assert res.returncode == 0, res.stderr
    notes = [line.strip() for line in res.stdout.splitlines() if line.strip().startswith("note: cost assumed")]
    assert any(n.startswith(f"note: cost assumed, not measured: source {text}: cannot open source") for n in notes)


def test_counts_below_one_are_refused_in_one_line() -> None:
    for args, text in ((("--sources", "0"), "--sources must be >= 1, got 0"), (("--cores", "-3"), "--cores must be >= 1")):
        res = doctor(*args)
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.strip().startswith("vapipe: error:") and text in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
