from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pipeline.config import parse_config
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from pipeline.trace import Tracer

ROOT = Path(__file__).resolve().parents[2]

# Decoding (30 ms, simulated without CPU) is the slowest step, as with a camera at
# full resolution; inference of the person detector takes 2-20 ms, by CPU.
PIPELINE = """
pipelines:
  p:
    stages:
      - {name: decode, type: "pipeline.testing:ListSource", params: {count: 40, width: 640, height: 480, decode_ms: 30}}
      - {name: person_detect, type: detect, params: {model: mediapipe/pose_detection, decoder: pose}}
      - {name: sink, type: "pipeline.testing:CollectSink"}
"""


def _tracks(trace: dict) -> dict[str, list[dict]]:
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    out: dict[str, list[dict]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            out.setdefault(names[(e["pid"], e["tid"])], []).append(e)
    return out


def _overlaps(a: dict, b: dict) -> bool:
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def _trace(tmp_path: Path, sync: bool, models_dir: Path) -> dict[str, list[dict]]:
    tracer = Tracer()
    graph = build_graph(parse_config(PIPELINE, "t.yaml").get("p"))
    summary = run_pipeline(graph, ["cam"], RunOptions(output_dir=tmp_path, sync=sync, trace=tracer,
                                                      handle_signals=False))
    assert summary.error is None
    path = tracer.write(tmp_path / "trace.json")
    return _tracks(json.loads(path.read_text()))


def test_async_trace_shows_decode_of_next_frame_overlapping_inference(tmp_path: Path, models_dir: Path) -> None:
    tracks = _trace(tmp_path, False, models_dir)
    decode = {e["args"]["seq"][0]: e for e in tracks["decode"]}
    requests = [n for n in tracks if n.startswith("person_detect request")]
    infer = {e["args"]["seq"]: e for n in requests for e in tracks[n]}
    assert len(decode) == 40 and len(infer) == 40
    # decode of N+1 (or of a later frame, where inference is the slower step on a loaded machine)
    hits = sum(any(_overlaps(decode[m], infer[n]) for m in range(n + 1, 40)) for n in range(39))
    assert hits >= 35, f"decoding a later frame overlapped inference of N only {hits}/39 times"


def test_sync_trace_runs_decode_and_inference_one_after_the_other(tmp_path: Path, models_dir: Path) -> None:
    tracks = _trace(tmp_path, True, models_dir)
    decode = {e["args"]["seq"][0]: e for e in tracks["decode"]}
    infer = {e["args"]["seq"]: e for e in tracks["person_detect"]}
    assert len(infer) == 40
    assert not any(_overlaps(decode[n + 1], infer[n]) for n in range(39))


def test_cli_writes_a_trace_file(clip: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    res = subprocess.run([sys.executable, "-m", "pipeline", "run", "persons", "--source",
                          str(clip), "--max-frames", "10", "--output", str(tmp_path),
                          "--no-progress", "--trace", str(trace)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    tracks = _tracks(json.loads(trace.read_text()))
    assert {"capture", "decode", "metadata"} <= set(tracks)
    assert sum(len(v) for k, v in tracks.items() if k.startswith("person_detect request")) == 10
