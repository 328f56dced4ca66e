"""``make bench``: ``vapipe bench`` in both regimes, side by side in one run.

* **decode-bound** (inference is cheap at the CPU's default precision): ``persons`` with 1
  and 4 cameras and ``faces`` on 1080p and 720p H.264 clips made from the shared clips;
* **inference-bound**: the same with OpenVINO forced to f32 (``INFERENCE_PRECISION_HINT: f32``
  on every model, in every mode), and ``ocr`` on a 1280x720 ``testsrc://ticker`` clip, at f32
  and at the runtime's default precision (left out where that is f32).

Peers run on the rows they fit when installed (``make peers``): MediaPipe FaceMesh on the
``faces`` rows, RapidOCR on ``ocr``.  ``persons-1`` also sweeps ``--requests 1,2,3,4``
(latency against FPS); the ``ocr`` rows also run vapipe on ONNX Runtime (``vapipe-ort``, the
same PP-OCR .onnx files).  Each row prints its table and writes ``OUT/ROW/bench.json`` and
``bench.png``; the run ends with one table of every row's ratios (medians of the rounds'
own) and targets (``OUT/summary.json``, written after every row).  A row whose mode fails
or hangs is reported as failed and the run goes on with the next (exit status 1).  A row is
one line of :data:`ROWS`: a pipeline, a clip, cameras and ``--set`` overrides.

    python -m bench.suite [--frames 150] [--rounds 5] [--out bench-output] [--only persons-1,ocr-720p-f32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .clips import scaled_clip, shared_dir, ticker_clip

__all__ = ["Row", "ROWS", "f32", "main", "without_f32_twins"]

PERSON_CLIP = "one-by-one-person-detection.mp4"
PERSON_FROM = 75      # the first frame with a person in view (the clip starts on an empty room)
FACE_CLIP = "head-pose-face-detection-female-and-male.gif"   # two faces
#: the modes of every row (vapipe-sync is not a target and stays out to keep the run short)
MODES = ("naive", "hand-tuned", "vapipe", "vapipe-unplanned", "decode-alone", "infer-alone")


def f32(*stages: str) -> tuple[str, ...]:
    """``--set`` values forcing OpenVINO to f32 on ``stages``."""
    return tuple(f"{s}.config={{INFERENCE_PRECISION_HINT: f32}}" for s in stages)


PERSONS_F32 = f32("person_detect")
FACES_F32 = f32("face_detect", "landmarks")
OCR_F32 = f32("text_detect", "direction", "recognize")


@dataclass(frozen=True)
class Row:
    """One benchmark: ``clip(frames)`` returns (video, ground truth or None)."""

    key: str
    regime: str
    pipeline: str
    clip: Callable[[int], tuple[Path, Path | None]]
    cameras: int = 1
    sets: tuple[str, ...] = ()
    frames: float = 1.0           # share of --frames per camera
    sweep: tuple[int, ...] = ()   # --requests-sweep
    engine: str = "openvino"      # --engine (onnxruntime: also vapipe-ort)
    default: bool = True          # part of a run without --only
    f32_twin: str | None = None   # the row this one repeats on a CPU that computes in f32 by default


def _shared(name: str, width: int, height: int, start: int = 0) -> Callable[[int], tuple[Path, Path | None]]:
    return lambda frames: (scaled_clip(name, frames, width, height, start), None)


def _ticker(width: int, height: int) -> Callable[[int], tuple[Path, Path | None]]:
    return lambda frames: ticker_clip(frames, width, height)


def _gif(name: str) -> Callable[[int], tuple[Path, Path | None]]:
    return lambda frames: (shared_dir() / "data" / "videos" / name, None)


DECODE, INFER = "decode-bound", "inference-bound"
# faces runs at 200-300 fps, so 150 frames last about half a second, and start-up (cold caches,
# 10 % more CPU per frame at 720p) and the drain at the end weigh: 600 frames measure the rate
# a camera keeps
FACES_FRAMES = 4.0
#: seconds a vapipe run of a row lasts at least (frames are added on fast machines): see
#: :func:`bench.runner.frames_for_run`
MIN_RUN_S = 4.0
ROWS: tuple[Row, ...] = (
    Row("persons-1", DECODE, "persons", _shared(PERSON_CLIP, 1920, 1080, PERSON_FROM), sweep=(1, 2, 3, 4)),
    Row("persons-4", DECODE, "persons", _shared(PERSON_CLIP, 1920, 1080, PERSON_FROM), cameras=4, frames=0.5),
    Row("faces-1080p", DECODE, "faces", _shared(FACE_CLIP, 1920, 1080), frames=FACES_FRAMES),
    Row("faces-720p", DECODE, "faces", _shared(FACE_CLIP, 1280, 720), frames=FACES_FRAMES),
    Row("persons-1-f32", INFER, "persons", _shared(PERSON_CLIP, 1920, 1080, PERSON_FROM), sets=PERSONS_F32),
    Row("persons-4-f32", INFER, "persons", _shared(PERSON_CLIP, 1920, 1080, PERSON_FROM), cameras=4, frames=0.5,
        sets=PERSONS_F32),
    Row("faces-1080p-f32", INFER, "faces", _shared(FACE_CLIP, 1920, 1080), sets=FACES_F32, frames=FACES_FRAMES),
    Row("faces-720p-f32", INFER, "faces", _shared(FACE_CLIP, 1280, 720), sets=FACES_F32, frames=FACES_FRAMES),
    # 90 frames: at 5 fps about 10 frames are in flight, and a run of 30 was a third filling
    # and draining (FPS ratios moved by up to 0.5 between 30- and 90-frame runs)
    Row("ocr-720p-f32", INFER, "ocr", _ticker(1280, 720), sets=OCR_F32, frames=0.6, engine="onnxruntime"),
    # OCR at the runtime's default precision (bf16 on CPUs with AVX-512 BF16 or AMX; where it is
    # f32 this row is ocr-720p-f32 again and is left out)
    Row("ocr-720p", INFER, "ocr", _ticker(1280, 720), frames=0.6, engine="onnxruntime", f32_twin="ocr-720p-f32"),
    # Not in the default run (--only): the GIF itself.
    Row("faces-gif", DECODE, "faces", _gif(FACE_CLIP), default=False),
    # The YOLO detector users bring (objects: YOLO11n, shared INT8 export), 1 and 4 cameras.
    Row("objects-1", INFER, "objects", _shared(PERSON_CLIP, 1920, 1080, PERSON_FROM)),
    Row("objects-4", INFER, "objects", _shared(PERSON_CLIP, 1920, 1080, PERSON_FROM), cameras=4, frames=0.5),
)


def measured_regime(res: dict[str, Any]) -> str:
    """Which limit is lower on this machine: decoding alone or inference alone (the row's name
    says what it was meant to be; on a CPU without bf16 the default precision is f32 too)."""
    dec = res["modes"].get("decode-alone", {}).get("fps")
    inf = res["modes"].get("infer-alone", {}).get("fps")
    if not dec or not inf:
        return "?"
    return DECODE if dec < inf else INFER


def _summary_line(key: str, regime: str, res: dict[str, Any]) -> str:
    r, vap = res.get("ratios", {}), res["modes"].get("vapipe", {})
    regime = measured_regime(res)
    peer = next((f"{v:.2f}x {k.split('/')[1]}" for k, v in r.items() if k.split("/")[1] in res.get("peers", {})), "-")
    failed = [c["check"].split(" >=")[0].split(" <=")[0] for c in res.get("checks", []) if not c["ok"]]
    cpu = vap.get("cpu_util")
    return (f"{key:<16} {regime:<15} {vap.get('fps', 0):7.1f} " + " ".join(
        f"{r.get(k, float('nan')):6.2f}" for k in ("vapipe/naive", "vapipe/hand-tuned", "vapipe/limit",
                                                  "vapipe/vapipe-unplanned"))
            + f" {('-' if cpu is None else f'{cpu:.0%}'):>5}  {peer:<16} "
            + (f"{r['vapipe-ort/vapipe']:6.2f}  " if "vapipe-ort/vapipe" in r else f"{'-':>6}  ")
            + (f"below target: {', '.join(failed)}" if failed else "all targets met"))


def format_summary(results: dict[str, tuple[str, dict[str, Any]]], failed: dict[str, str] | None = None) -> str:
    """One line per row measured and per row that ``failed`` (row -> the error)."""
    lines = [f"{'row':<16} {'measured':<15} {'vapipe':>7} {'naive':>6} {'hand':>6} {'limit':>6} {'unpl.':>6} "
             f"{'cpu':>5}  {'peer':<16} {'ort/ov':>6}  targets (vapipe/x >= 1.3, 1.2, 0.9, 1.0; cpu >= 90 %)"]
    lines += [_summary_line(key, regime, res) for key, (regime, res) in results.items()]
    lines += [f"{key:<16} failed: {error}" for key, error in (failed or {}).items()]
    return "\n".join(lines)


def _write_summary(out: str, results: dict[str, tuple[str, dict[str, Any]]], failed: dict[str, str]) -> None:
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {k: {"regime": g, **v} for k, (g, v) in results.items()}
    doc.update({k: {"error": e} for k, e in failed.items()})
    (path / "summary.json").write_text(json.dumps(doc, indent=2))


def without_f32_twins(keys: list[str], precision: str) -> list[str]:
    """``keys`` without the rows that would repeat another row of ``keys`` on a CPU whose
    default precision is ``precision`` (f32: a default-precision row is its f32 twin); says
    which it leaves out."""
    rows = {r.key: r for r in ROWS}
    if precision != "f32":
        return keys
    twins = [k for k in keys if rows[k].f32_twin in keys]
    for key in twins:
        print(f"{key}: left out, this CPU computes in f32 by default (the same run as {rows[key].f32_twin})")
    return [k for k in keys if k not in twins]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=150, help="frames per camera (rows scale it) and clip length")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per mode; the median is reported")
    ap.add_argument("--out", default="bench-output")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated rows (default: the default ones); all: {', '.join(r.key for r in ROWS)}")
    ap.add_argument("--no-peers", action="store_true", help="do not run the peers")
    ap.add_argument("--min-run-s", type=float, default=MIN_RUN_S,
                    help="lengthen a row whose vapipe run is shorter than this on this machine (0: never)")
    args = ap.parse_args(argv)
    rows = {r.key: r for r in ROWS}
    keys = [k.strip() for k in args.only.split(",")] if args.only else [r.key for r in ROWS if r.default]
    unknown = [k for k in keys if k not in rows]
    if unknown:
        ap.error(f"unknown row {unknown[0]!r}; valid: {', '.join(rows)}")
    models = shared_dir() / "models"
    if models.is_dir():
        os.environ.setdefault("VAPIPE_MODELS_DIR", str(models))
    from .plan import BenchError
    from .report import format_table
    from .runner import frames_for_run, run_bench

    from pipeline.precision import default_precision

    keys = without_f32_twins(keys, default_precision())
    config = Path(__file__).resolve().parents[1] / "pipelines.yaml"
    results: dict[str, tuple[str, dict[str, Any]]] = {}
    failed: dict[str, str] = {}
    t0 = time.monotonic()
    for n, key in enumerate(keys, 1):
        row = rows[key]
        frames = max(2, round(args.frames * row.frames))
        try:
            clip, truth = row.clip(frames)
            if args.min_run_s > 0:
                longer, run_s = frames_for_run(row.pipeline, str(clip), row.cameras, frames, args.min_run_s,
                                               config, row.sets)
                if longer > frames:
                    print(f"\n{key}: {frames} frames per camera ran for {run_s:.1f} s here; {longer} frames per "
                          f"camera, for runs of at least {args.min_run_s:g} s", flush=True)
                    frames = longer
                    clip, truth = row.clip(frames)
            print(f"\n== [{n}/{len(keys)}] {key} ({row.regime}): vapipe bench {row.pipeline} --source {clip.name} "
                  f"--cameras {row.cameras} --frames {frames}" + "".join(f" --set '{s}'" for s in row.sets)
                  + (f" --engine {row.engine}" if row.engine != "openvino" else "")
                  + f"   ({time.monotonic() - t0:.0f} s so far)", flush=True)
            res = run_bench(row.pipeline, str(clip), cameras=row.cameras, frames=frames, out=Path(args.out) / key,
                            rounds=args.rounds, config=config,
                            sets=row.sets, requests_sweep=row.sweep, peers=not args.no_peers, truth=truth,
                            base_modes=MODES, engine=row.engine, log=lambda msg: print(msg, flush=True))
        except BenchError as exc:  # a mode that failed or hung loses its row, not the rows around it
            print(f"{key}: failed: {exc}", flush=True)
            failed[key] = str(exc)
        else:
            print(format_table(res), flush=True)
            results[key] = (row.regime, res)
        _write_summary(args.out, results, failed)  # after every row: an interrupted run keeps what it measured
    summary = format_summary(results, failed)
    print(f"\n== both regimes, {os.cpu_count()} cores, {time.monotonic() - t0:.0f} s\n{summary}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
