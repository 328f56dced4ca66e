"""Fixtures for the service tests: a pipeline file of light pipelines, the app in-process
(TestClient) and a real server on a free port (uvicorn in a thread)."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the serve extra (fastapi)")

from tests.live.helpers import free_port  # noqa: E402

PIPELINES = """
pipelines:
  scene:
    description: A paced synthetic scene to JSON Lines
    parameters: {rate: decode.fps}
    stages:
      - {name: decode, type: decode, params: {realtime: true, loop: true}}
      - {name: metadata, type: metadata}
  counted:
    description: Thirty frames from a list, fake inference
    version: 2
    stages:
      - {name: src, type: "pipeline.testing:ListSource", params: {count: 30, decode_ms: 5}}
      - {name: infer, type: "pipeline.testing:SleepInfer", params: {ms: 2}}
      - {name: metadata, type: metadata}
"""

SCENE = "testsrc://bars?width=320&height=240"


def serve_args(tmp_path: Path, **kw: Any) -> argparse.Namespace:
    from service.cli import build_parser

    config = tmp_path / "pipelines.yaml"
    config.write_text(kw.pop("pipelines", PIPELINES), encoding="utf-8")
    argv = ["--config", str(config), "--allow-dir", str(tmp_path), "--output", str(tmp_path / "out"),
            "--port", str(kw.pop("port", 8080))]
    if kw.pop("allow_user_stages", True):
        argv.append("--allow-user-stages")
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return build_parser().parse_args(argv)


@pytest.fixture
def make_client(tmp_path: Path):
    """make_client(**serve options) -> (TestClient, manager); instances are stopped at teardown."""
    from fastapi.testclient import TestClient

    from service.cli import serve_app

    made = []

    def make(**kw: Any):
        app, manager = serve_app(serve_args(tmp_path, **kw))
        client = TestClient(app)
        made.append((client, manager))
        return client, manager

    yield make
    for client, manager in made:
        manager.close()
        client.close()


@pytest.fixture
def client(make_client):
    return make_client()[0]


class LiveServer:
    def __init__(self, app: Any, manager: Any, port: int) -> None:
        import uvicorn

        self.manager, self.port = manager, port
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                                    access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise AssertionError("server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.manager.close()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    from service.cli import serve_app

    port = free_port()
    app, manager = serve_app(serve_args(tmp_path, port=port))
    server = LiveServer(app, manager, port).start()
    yield server
    server.stop()


def wait_state(client: Any, instance_id: str, states: tuple[str, ...], timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = client.get(f"/pipelines/status/{instance_id}").json()
        if status["state"] in states:
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"instance {instance_id} stayed {status['state']} ({status['message']})")
        time.sleep(0.05)
