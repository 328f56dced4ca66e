"""``vapipe run``: checks the options, then runs a pipeline on its sources and prints the summary."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .cli import EXIT_FAILURE, EXIT_OK, CliError
from .redact import redact

__all__ = ["cmd_run"]


def cmd_run(args: argparse.Namespace, config_path: str) -> int:
    from .config import load_config, validate_pipeline
    from .overrides import apply_overrides
    from .graph import build_graph
    from .runtime import RunOptions, run_pipeline
    from .progress import ConsoleProgress
    from .run_options import check_cluster_options

    cfg = load_config(config_path, check_files=False)
    spec = cfg.get(args.name)
    sets = list(args.set)
    if args.device:
        sets += _device_sets(args.device, spec, on_this_machine=args.cluster is None)
    if args.overrides:
        from .overrides import apply_override_file

        spec = apply_override_file(spec, args.overrides)
    spec = apply_overrides(spec, sets)
    validate_pipeline(spec, config_path, check_files=True)  # model files of this pipeline, before anything runs
    graph = build_graph(spec, config_path)
    if args.max_frames is not None and args.max_frames < 1:
        raise CliError(f"--max-frames must be >= 1, got {args.max_frames}")
    if args.requests is not None and args.requests < 1:
        raise CliError(f"--requests must be >= 1, got {args.requests}")
    if args.sync and args.requests is not None:
        raise CliError(f"--sync runs one request per camera; --requests {args.requests} asks for more: give one")
    if args.cores is not None and args.cores < 0:
        raise CliError(f"--cores must be >= 0, got {args.cores}")
    check_cluster_options(args)
    if args.cluster:
        from cluster.cli import run_on_cluster  # the cluster layer imports the core, never the reverse

        return run_on_cluster(args, spec, config_path)
    from .trace import Tracer

    priorities = _priorities(args.priority, args.min_fps, len(args.source))
    opts = RunOptions(output_dir=Path(args.output), sync=args.sync, capture_delay_ms=args.capture_delay_ms,
                      max_frames=args.max_frames, requests=args.requests, cores=args.cores, replan=args.replan,
                      priorities=priorities,
                      trace=Tracer() if args.trace else None)
    progress = None if args.no_progress or args.json else ConsoleProgress()
    summary = run_pipeline(graph, args.source, opts, progress=progress)
    if progress is not None:
        progress.finish()
    if opts.trace is not None:
        summary.outputs.append(str(opts.trace.write(args.trace)))
    if args.json:
        print(redact(json.dumps(summary.as_dict(), indent=2)))
    elif not summary.error or any(s.processed for s in summary.sources):
        print(redact(summary.table()))
    if summary.error:
        print(f"vapipe: error: {redact(summary.error)}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _device_sets(device: str, spec: Any, on_this_machine: bool = True) -> list[str]:
    """``--set STAGE.device=DEVICE`` for every stage that runs a model; a pipeline with no such
    stage, or a device not on this machine when the run is to be here (``on_this_machine``; a
    cluster's nodes have their own), is refused before anything runs."""
    from .devices import missing_here
    from .engine import validate_device
    from .registry import resolve_stage_type

    try:
        validate_device(device)
    except ValueError as exc:
        raise CliError(f"--device {device}: {exc}") from None
    names = [st.name for st in spec.stages if "device" in resolve_stage_type(st.type).Params.model_fields]
    if not names:
        raise CliError(f"--device {device}: pipeline {spec.name!r} runs no model (stages: "
                       f"{', '.join(st.name for st in spec.stages)}); leave it out")
    reason = missing_here(device) if on_this_machine else None
    if reason:
        raise CliError(f"--device {device}: {reason}")
    return [f"{name}.device={device}" for name in names]


def _priorities(given: list[str], min_fps: float, sources: int) -> list[Any] | None:
    """``--priority N=LEVEL`` options -> one SourcePriority per source (None: none given)."""
    from .arbiter import LEVELS, SourcePriority

    if not given and not min_fps:
        return None
    if min_fps < 0:
        raise CliError(f"--min-fps must be >= 0, got {min_fps}")
    levels = ["normal"] * sources
    for item in given:
        index, _, level = item.partition("=")
        if not index.isdigit() or not 1 <= int(index) <= sources or level not in LEVELS:
            raise CliError(f"--priority {item!r}: expected N=LEVEL with N in 1..{sources} (the --source "
                           f"order) and LEVEL one of {', '.join(LEVELS)}")
        levels[int(index) - 1] = level
    return [SourcePriority(level, min_fps) for level in levels]
