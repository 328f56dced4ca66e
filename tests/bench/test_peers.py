"""Peers: which pipelines they fit, and (when the peers' environment exists, ``make peers``)
that they run the same models on the same frames and find what vapipe finds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.chain import load_chain, load_spec
from bench.peers.registry import PEERS, peer_python, peers_for, unavailable_reason
from bench.plan import BenchPlan
from bench.runner import ROOT


def _chain(pipeline: str):
    return load_chain(load_spec(BenchPlan(pipeline=pipeline, config=str(ROOT / "pipelines.yaml"), source="")))


def test_peers_fit_their_pipelines() -> None:
    assert [p.name for p in peers_for(_chain("faces"))] == ["mediapipe"]
    assert [p.name for p in peers_for(_chain("ocr"))] == ["rapidocr"]
    assert peers_for(_chain("persons")) == []


def test_missing_interpreter_says_how_to_get_one(tmp_path: Path) -> None:
    assert "make peers" in unavailable_reason(None, "mediapipe")
    assert "not found" in unavailable_reason(str(tmp_path / "python"), "mediapipe")
    assert "cannot import" in unavailable_reason(sys.executable, "no_such_module_here")


def _peer(name: str) -> Path:
    python = peer_python()
    reason = unavailable_reason(str(python) if python else None, PEERS[name].module)
    if reason:
        pytest.skip(f"needs the peers' environment with {PEERS[name].requirement} (make peers): {reason}")
    return python


def _bench(env: dict[str, str], *args: str | Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pipeline", "bench", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_rapidocr_reads_the_same_lines(bench_env: dict[str, str], ticker: tuple[Path, Path], tmp_path: Path) -> None:
    python = _peer("rapidocr")
    clip, truth = ticker
    proc = _bench(bench_env, "ocr", "--source", clip, "--frames", 4, "--rounds", 1, "--out", tmp_path,
                  "--truth", truth, "--modes", "vapipe,rapidocr", "--peer-python", python)
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["peers"]["rapidocr"]["same_models"] is True
    assert result["modes"]["rapidocr"]["frames_per_camera"] == [4]
    assert result["modes"]["rapidocr"]["version"] == "rapidocr-onnxruntime 1.4.4"
    a = result["agreement"]["rapidocr vs vapipe"]
    assert a["matched"] >= 0.9 * a["objects_ref"] and a["texts_equal"] >= 0.8 * a["texts"], a
    acc = result["accuracy"]
    assert acc["rapidocr"]["lines"] == acc["vapipe"]["lines"] > 0 and acc["rapidocr"]["accuracy"] >= 0.8, acc
    assert any(c["check"].startswith("vapipe lines read >= rapidocr's") for c in result["checks"])
    assert "vapipe/rapidocr" in proc.stdout


def test_mediapipe_face_mesh_finds_the_same_faces(bench_env: dict[str, str], videos_dir: Path,
                                                  tmp_path: Path) -> None:
    python = _peer("mediapipe")
    gif = videos_dir / "head-pose-face-detection-female-and-male.gif"   # two faces: the content matters
    _bench(bench_env, "faces", "--source", gif, "--frames", 20, "--rounds", 1, "--out", tmp_path,
           "--modes", "vapipe,mediapipe", "--peer-python", python)
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["peers"]["mediapipe"]["same_models"] is True
    assert result["modes"]["mediapipe"]["max_faces"] == 2
    a = result["agreement"]["mediapipe vs vapipe"]
    assert a["frames"] >= 15 and a["matched"] >= 0.9 * a["objects_ref"], a
    assert a["landmarks_mean_abs_px"] < 3.0, a      # 468 points per face, source pixels
