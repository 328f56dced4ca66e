"""Which instance a log line of ``vapipe serve`` comes from."""

from __future__ import annotations

import io
import logging
import threading
import time

from service.logs import FORMAT, InstanceTag, thread_prefix
from tests.live.helpers import free_port


def _tagging_handler(out: io.StringIO) -> logging.Handler:
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(InstanceTag())
    return handler


def _formatted(record_from: threading.Thread | None, message: str) -> str:
    out = io.StringIO()
    handler = _tagging_handler(out)
    logger = logging.getLogger("vapipe.test.logs")
    logger.addHandler(handler)
    try:
        if record_from is None:
            logger.warning(message)
        else:
            record_from._target = lambda: logger.warning(message)  # type: ignore[attr-defined]
            record_from.start()
            record_from.join()
    finally:
        logger.removeHandler(handler)
    return out.getvalue().strip()


def test_lines_from_an_instance_thread_carry_its_id_and_others_do_not() -> None:
    tagged = threading.Thread(name=f"{thread_prefix('0a1b')}cam:read")
    assert _formatted(tagged, "source 'cam': stalled") == "WARNING vapipe.test.logs: [0a1b] source 'cam': stalled"
    assert _formatted(None, "ready") == "WARNING vapipe.test.logs: ready"


def test_two_instances_with_cameras_of_one_name_are_told_apart(client) -> None:
    out = io.StringIO()
    handler = _tagging_handler(out)
    logger = logging.getLogger("vapipe")
    logger.addHandler(handler)
    url = f"rtsp://127.0.0.1:{free_port()}/cam"  # nothing listens there: each camera logs its retries
    body = {"source": {"uri": url, "type": "uri"}, "parameters": {"decode.reconnect": {"initial_s": 0.2}}}
    try:
        ids = [client.post("/pipelines/scene/1", json=body).json() for _ in range(2)]
        deadline = time.monotonic() + 30
        while not all(f"[{i}] source 'cam': reconnecting" in out.getvalue() for i in ids):
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.1)
        for i in ids:
            client.delete(f"/pipelines/{i}")
    finally:
        logger.removeHandler(handler)
    assert all(t.name.split("|")[0] not in ids for t in threading.enumerate() if t.is_alive()
               and t.name.endswith(":read")), "a stopped instance's camera thread is still running"


def test_the_server_log_replaces_the_command_lines_and_tags_instances() -> None:
    """``vapipe serve`` starts as ``vapipe``, which set up a WARNING log of its own first: the
    server's INFO lines and instance tags must still come out."""
    from service.cli import configure_logging
    from service.security import RedactingFilter

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        root.handlers = []
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # the core's
        configure_logging(debug=False)
        assert root.level == logging.INFO and len(root.handlers) == 1
        handler = root.handlers[0]
        assert handler.formatter._fmt == FORMAT
        assert {type(f) for f in handler.filters} >= {InstanceTag, RedactingFilter}
        configure_logging(debug=True)
        assert root.level == logging.DEBUG
    finally:
        for h in root.handlers:
            h.close()
        root.handlers, level = saved
        root.setLevel(level)
