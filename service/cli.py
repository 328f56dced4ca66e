"""``vapipe serve``: the REST API, metrics and live page over the pipelines of a YAML file."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import ipaddress
import logging
import signal
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main", "build_parser", "build_server", "serve_app"]

log = logging.getLogger("vapipe.serve")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vapipe serve", description="Serve pipelines over HTTP (DL Streamer Pipeline "
                                "Server's REST API), with MQTT, Prometheus metrics and a live page.")
    p.add_argument("--config", default=None, help="pipeline file (default: $VAPIPE_CONFIG, else ./pipelines.yaml, else the shipped one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need "
                   "--token-file)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--token-file", default=None, metavar="F", help="file holding the bearer token every route "
                   "but /healthz then requires")
    p.add_argument("--allow-dir", action="append", default=[], metavar="DIR",
                   help="directory file sources and destinations may lie in (repeat; default: the working "
                        "directory)")
    p.add_argument("--allow-user-stages", action="store_true", help="serve pipelines with module:Class stages")
    p.add_argument("--max-running", type=int, default=None, metavar="N", help="instances running at once; "
                   "later ones wait as QUEUED")
    p.add_argument("--output", default="output", metavar="DIR", help="outputs of the pipelines' own sinks, per "
                   "instance: DIR/INSTANCE/")
    p.add_argument("--cores", type=int, default=None, metavar="N", help="thread budget per instance (0: runtime "
                   "defaults)")
    p.add_argument("--live-fps", type=float, default=5.0, help="live view frame rate cap")
    p.add_argument("--live-width", type=int, default=640, help="live view width in pixels")
    p.add_argument("--cluster", default=None, metavar="ray://HOST:PORT|HOST:PORT|auto",
                   help="run the instances' cameras on a Ray cluster (needs vapipe[cluster]); this process is its "
                        "driver and /metrics covers every camera")
    p.add_argument("--cpus-per-camera", type=float, default=None, metavar="F",
                   help="with --cluster: Ray CPUs reserved per camera (default: its measured cost at --camera-fps)")
    p.add_argument("--camera-fps", type=float, default=None, metavar="FPS",
                   help="with --cluster: the frame rate the default --cpus-per-camera is sized for (default 25)")
    p.add_argument("--cameras-per-actor", type=int, default=None, metavar="N",
                   help="with --cluster: cameras per actor process at most (default 32)")
    p.add_argument("--debug", action="store_true", help="debug logs and tracebacks")
    return p


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_token(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"--token-file {path}: {exc.strerror or exc}") from None
    if len(token) < 16:
        raise ValueError(f"--token-file {path}: the token must be at least 16 characters")
    return token


def serve_app(args: argparse.Namespace):  # noqa: ANN201 - (app, manager), FastAPI imported lazily
    """Build the application from parsed arguments; ValueError (one line) for bad ones."""
    from pipeline.pipeline_file import find_pipeline_file
    from pipeline.run_options import check_cluster_options

    from .app import create_app
    from .backend import LocalBackend
    from .catalog import Catalog
    from .instances import InstanceManager
    from .security import Guard

    if not _is_loopback(args.host) and not args.token_file:
        raise ValueError(f"--host {args.host} is not a loopback address: pass --token-file so that clients "
                         "must authenticate")
    if args.max_running is not None and args.max_running < 1:
        raise ValueError(f"--max-running must be >= 1, got {args.max_running}")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be 1-65535, got {args.port}")
    for d in args.allow_dir:
        if not Path(d).is_dir():
            raise ValueError(f"--allow-dir {d}: not a directory")
    check_cluster_options(args)
    if args.cluster is not None and args.cores is not None:
        raise ValueError("--cores is not supported with --cluster (each actor's budget is its Ray CPUs: "
                         "--cpus-per-camera)")
    token = _read_token(args.token_file) if args.token_file else None
    guard = Guard(args.allow_dir, args.allow_user_stages, token)
    catalog = Catalog(find_pipeline_file(args.config).path, guard)
    if args.cluster is not None:
        from cluster.capacity import DEFAULT_CAMERA_FPS
        from cluster.service_backend import ClusterBackend  # the cluster layer, only when asked for

        fps = DEFAULT_CAMERA_FPS if args.camera_fps is None else args.camera_fps
        backend: Any = ClusterBackend(args.cluster, cpus_per_camera=args.cpus_per_camera, camera_fps=fps,
                                      cameras_per_actor=args.cameras_per_actor)
    else:
        backend = LocalBackend(cores=args.cores, live_fps=args.live_fps, live_width=args.live_width)
    manager = InstanceManager(backend, Path(args.output), args.max_running)
    return create_app(catalog, manager, guard), manager


def build_server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server for ``app`` whose exit (SIGINT, SIGTERM) first ends the open live views, so that
    shutdown does not wait for viewers to leave."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.closing.set()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            # uvicorn re-raises the captured SIGTERM/SIGINT once it has stopped serving, which
            # would kill the process (SIGTERM's default action) before main() stops the instances
            # and finalises their outputs: keep the signal and let main() exit with 128 + signal.
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", [])
                    self.exit_signals = list(captured)
                    captured.clear()

    return Server(uvicorn.Config(app, host=host, port=port, access_log=False, log_level="warning",
                                 timeout_graceful_shutdown=5))


def configure_logging(debug: bool) -> None:
    """The server's log: INFO (DEBUG with ``--debug``), each line tagged with the instance it
    comes from, passwords redacted.  Replaces what ``vapipe`` set up before it handed over."""
    from .logs import FORMAT, InstanceTag
    from .security import RedactingFilter

    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format=FORMAT, force=True)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())  # passwords in camera URLs never reach a log
        handler.addFilter(InstanceTag())  # which instance a line comes from


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.debug)
    if importlib.util.find_spec("uvicorn") is None:  # used by build_server
        print("vapipe: error: vapipe serve needs the serve extra: pip install 'vapipe[serve]'", file=sys.stderr)
        return 2
    try:
        app, manager = serve_app(args)
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if args.debug:
            raise
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"vapipe: error: {text}", file=sys.stderr)
        return 2
    server = build_server(app, args.host, args.port)
    where = f"; cameras on the Ray cluster {args.cluster}" if args.cluster else ""
    print(f"vapipe serve: http://{args.host}:{args.port}/ (API docs at /docs){where}", file=sys.stderr, flush=True)
    try:
        server.run()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopping instances must not be interrupted
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        manager.close()
    signals = getattr(server, "exit_signals", [])
    return 128 + int(signals[0]) if signals else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
