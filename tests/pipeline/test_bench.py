"""``vapipe bench`` on a short clip: schema, every mode produced frames, the baselines
find the same objects as vapipe on the same frames (so they do the same work), and
the chart is a readable PNG."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODES = ("naive", "hand-tuned", "vapipe", "vapipe-sync", "vapipe-unplanned", "decode-alone", "infer-alone")


@pytest.fixture(scope="module")
def env(models_dir: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["VAPIPE_MODELS_DIR"] = str(models_dir)
    return e


@pytest.fixture(scope="module")
def person_clip(videos_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 frames of the shared 768x432 clip where a person is in view (frames 75..104)."""
    import av

    out = tmp_path_factory.mktemp("clip") / "person-30.mp4"
    with av.open(str(videos_dir / "one-by-one-person-detection.mp4")) as src, av.open(str(out), "w") as dst:
        stream = dst.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 768, 432, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "20"}
        for i, frame in enumerate(src.decode(video=0)):
            if i < 75:
                continue
            if i >= 105:
                break
            f = frame.reformat(format="yuv420p")
            f.pts = None
            for p in stream.encode(f):
                dst.mux(p)
        for p in stream.encode(None):
            dst.mux(p)
    return out


def bench(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", "bench", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_bench_persons(env: dict[str, str], person_clip: Path, tmp_path: Path) -> None:
    proc = bench(env, "persons", "--source", person_clip, "--frames", 30, "--rounds", 1, "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "vapipe/hand-tuned" in proc.stdout and "limit" in proc.stdout
    result = json.loads((tmp_path / "bench.json").read_text())
    for key in ("pipeline", "source", "width", "height", "cameras", "frames", "rounds", "cores", "modes",
                "limit_fps", "ratios", "checks", "agreement"):
        assert key in result, key
    assert (result["width"], result["height"], result["frames"]) == (768, 432, 30)
    assert set(result["modes"]) == set(MODES)
    for mode, r in result["modes"].items():
        assert r["fps"] > 0, mode
        assert len(r["rounds"]) == 1
        if mode != "infer-alone":
            assert r["frames_per_camera"] == [30], mode
            assert 0 < r["cpu_util"] <= 1.05, mode
    for mode in ("naive", "hand-tuned", "vapipe", "vapipe-sync", "vapipe-unplanned"):
        assert result["modes"][mode]["latency_p95_ms"] >= result["modes"][mode]["latency_p50_ms"] > 0
    assert set(result["ratios"]) == {"vapipe/naive", "vapipe/hand-tuned", "vapipe/vapipe-sync",
                                     "vapipe/vapipe-unplanned", "vapipe/limit"}
    assert result["modes"]["vapipe"]["threads"].startswith("threads: ")
    assert result["modes"]["vapipe-unplanned"]["threads"] == "threads: runtime defaults (--cores 0: no plan)"
    # Honesty: the same people in the same frames, boxes nearly identical.
    for key in ("naive vs vapipe", "hand-tuned vs vapipe", "vapipe-sync vs vapipe", "vapipe-unplanned vs vapipe"):
        a = result["agreement"][key]
        assert a["frames"] == 30
        assert a["objects_ref"] >= 20, a  # a person is in view in (nearly) every frame
        assert a["matched"] == a["objects_ref"] == a["objects"], (key, a)
        assert a["mean_iou"] > 0.9 and a["min_iou"] > 0.75, (key, a)
    img = cv2.imread(str(tmp_path / "bench.png"))
    assert img is not None and img.shape[2] == 3 and img.shape[0] > 100


def test_bench_faces_landmarks_agree(env: dict[str, str], videos_dir: Path, tmp_path: Path) -> None:
    """Two models at once, with the thread plan and with every runtime's defaults."""
    gif = videos_dir / "head-pose-face-detection-female-and-male.gif"
    proc = bench(env, "faces", "--source", gif, "--frames", 20, "--rounds", 1, "--out", tmp_path,
                 "--modes", "naive,hand-tuned,vapipe,vapipe-unplanned")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "bench.json").read_text())
    assert set(result["modes"]) == {"naive", "hand-tuned", "vapipe", "vapipe-unplanned"}
    planned = result["modes"]["vapipe"]["threads"]
    import re

    for stage in ("face_detect", "landmarks"):  # two light models: one single-threaded stream each
        assert re.search(rf"{stage} [\d.]+ ms/inference .* -> 1 stream x 1 thread", planned), planned
    assert "vapipe/vapipe-unplanned" in result["ratios"]
    for key in ("naive vs vapipe", "hand-tuned vs vapipe", "vapipe-unplanned vs vapipe"):
        a = result["agreement"][key]
        assert a["objects_ref"] >= 15 and a["matched"] == a["objects_ref"] == a["objects"], (key, a)
        assert a["mean_iou"] > 0.9, (key, a)
        assert a["landmarks_mean_abs_px"] < 2.0, (key, a)  # 468 points per face, source pixels


def test_bench_rejects_non_file_source(env: dict[str, str], tmp_path: Path) -> None:
    proc = bench(env, "persons", "--source", "testsrc://bars", "--out", tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vapipe: error: ") and "video file" in lines[0]
