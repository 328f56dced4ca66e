"""``vapipe bench``: the command line of the benchmark (the core CLI hands its arguments over)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from pipeline.cli import OneLineParser

from .engine_modes import ENGINES
from .plan import BASE_MODES, ENGINE_MODES

__all__ = ["build_parser", "main"]


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def build_parser(default_config: str = "pipelines.yaml") -> argparse.ArgumentParser:
    b = OneLineParser(prog="vapipe bench", description="A pipeline against the loops users write, "
                                "peers (MediaPipe, RapidOCR) and the machine's limits, side by side.")
    b.add_argument("name", help="pipeline")
    b.add_argument("--source", required=True, metavar="FILE", help="video file")
    b.add_argument("--config", default=default_config, metavar="FILE", help="pipeline file")
    b.add_argument("--cameras", type=int, default=1, metavar="N", help="run N copies of the source at once")
    b.add_argument("--frames", type=int, default=None, metavar="N",
                   help="frames per camera (default: the whole source; longer sources loop)")
    b.add_argument("--rounds", type=int, default=3, metavar="R", help="rounds (median reported)")
    b.add_argument("--out", default="bench-output", metavar="DIR", help="where bench.json and bench.png go")
    b.add_argument("--set", action="append", default=[], metavar="STAGE.PARAM=VALUE",
                   help="override a parameter in every mode, e.g. "
                        "'person_detect.config={INFERENCE_PRECISION_HINT: f32}'")
    b.add_argument("--modes", default=None, metavar="M,M",
                   help=f"comma-separated subset of {','.join(BASE_MODES)}, {','.join(ENGINE_MODES)}, mediapipe, "
                        "rapidocr, vapipe-rN "
                        "(default: all, and the peers that fit the pipeline when installed)")
    b.add_argument("--requests-sweep", type=_int_list, default=[], metavar="N,N",
                   help="also run vapipe with each of these infer request counts per camera "
                        "(vapipe-rN; charted as latency against FPS), e.g. 1,2,3,4")
    b.add_argument("--engine", default="openvino", choices=ENGINES,
                   help="also run vapipe with every inference stage on this engine: onnxruntime adds the mode "
                        "vapipe-ort (the pipeline's models must be .onnx files; ratio vapipe-ort/vapipe); "
                        "default openvino, vapipe's own engine only")
    b.add_argument("--no-peers", action="store_true", help="do not run the peers")
    b.add_argument("--peer-python", default=None, metavar="PYTHON",
                   help="interpreter with the peers installed (default: $VAPIPE_PEERS_PYTHON, else .venv-peers)")
    b.add_argument("--truth", default=None, metavar="FILE",
                   help="ground-truth text lines of the source (written with ticker clips): lines read per mode")
    return b


def main(argv: Sequence[str], default_config: str = "pipelines.yaml") -> int:
    """Run ``vapipe bench ARGV``; errors are raised for the caller to print in one line."""
    from .report import format_table
    from .runner import run_bench

    args = build_parser(default_config).parse_args(list(argv))
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip()) if args.modes else None
    result = run_bench(args.name, args.source, cameras=args.cameras, frames=args.frames, out=args.out,
                       rounds=args.rounds, config=args.config, modes=modes, sets=args.set,
                       requests_sweep=args.requests_sweep, peers=not args.no_peers, peer_python=args.peer_python,
                       truth=args.truth, engine=args.engine, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(format_table(result))
    print(f"wrote {Path(args.out) / 'bench.json'}; chart: {result['chart']}")
    return 0
