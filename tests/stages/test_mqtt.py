"""The MQTT sink against a real broker (Debian's mosquitto on loopback)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import parse_config
from pipeline.frame import Detections, Frame
from pipeline.graph import build_graph
from pipeline.runtime import RunOptions, run_pipeline
from pipeline.session import Session
from tests.debian import need
from tests.live.helpers import free_port

mqtt = pytest.importorskip("paho.mqtt.client", reason="needs paho-mqtt (the serve extra)")

PIPELINE = """
pipelines:
  p:
    stages:
      - {{name: src, type: "pipeline.testing:ListSource", params: {{count: {count}, decode_ms: {ms}}}}}
      - {{name: mqtt, type: mqtt, params: {{host: "127.0.0.1:{port}", topic: "t/{{source}}", qos: 1,
          instance: test, buffer: {buffer}, reconnect_min_s: 0.5, reconnect_max_s: 1}}}}
"""


class Broker:
    def __init__(self, binary: str, tmp: Path) -> None:
        self.binary, self.port = binary, free_port()
        self.conf = tmp / "mosquitto.conf"
        self.conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        import socket

        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("mosquitto did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


@pytest.fixture
def broker(tmp_path: Path):
    b = Broker(need("mosquitto", "mosquitto"), tmp_path)
    b.start()
    yield b
    b.kill()


class Subscriber:
    """Collects (topic, payload) in arrival order; reconnects and resubscribes by itself."""

    def __init__(self, port: int, topics: list[str]) -> None:
        self.messages: list[tuple[str, bytes, float]] = []
        self.lock = threading.Lock()
        self.connected = threading.Event()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"sub-{port}")
        c.reconnect_delay_set(min_delay=1, max_delay=1)
        c.on_connect = lambda cl, *_: ([cl.subscribe(t, qos=1) for t in topics], self.connected.set())
        c.on_message = self._on_message
        c.connect("127.0.0.1", port)
        c.loop_start()
        self.client = c
        assert self.connected.wait(10), "subscriber could not connect"
        time.sleep(0.2)

    def _on_message(self, _c, _u, msg) -> None:
        with self.lock:
            self.messages.append((msg.topic, msg.payload, time.monotonic()))

    def payloads(self, topic: str) -> list[bytes]:
        with self.lock:
            return [p for t, p, _ in self.messages if t == topic]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _graph(port: int, count: int, ms: float, buffer: int = 1000):
    return build_graph(parse_config(PIPELINE.format(port=port, count=count, ms=ms, buffer=buffer)).get("p"))


def test_every_frame_arrives_in_order_and_availability_is_retained(broker: Broker, tmp_path: Path) -> None:
    sub = Subscriber(broker.port, ["t/#", "vapipe/test/available"])
    try:
        summary = run_pipeline(_graph(broker.port, 120, 0), ["cam"], RunOptions(output_dir=tmp_path,
                                                                                 handle_signals=False))
        assert summary.error is None
        deadline = time.monotonic() + 10
        while len(sub.payloads("t/cam")) < 120 and time.monotonic() < deadline:
            time.sleep(0.05)
        records = [json.loads(p) for p in sub.payloads("t/cam")]
        assert [r["seq"] for r in records] == list(range(120))
        assert all(r["objects"] == [] and r["source"] == "cam" for r in records)
        assert sub.payloads("vapipe/test/available")[:1] == [b"online"]
        deadline = time.monotonic() + 5
        while sub.payloads("vapipe/test/available")[-1:] != [b"offline"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sub.payloads("vapipe/test/available")[-1] == b"offline"
    finally:
        sub.close()
    # a late subscriber still learns the state from the retained message
    late = Subscriber(broker.port, ["vapipe/test/available"])
    try:
        deadline = time.monotonic() + 5
        while not late.payloads("vapipe/test/available") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert late.payloads("vapipe/test/available") == [b"offline"]
    finally:
        late.close()


def test_events_and_dlstreamer_shape(broker: Broker) -> None:
    from stages.mqtt import Mqtt

    sub = Subscriber(broker.port, ["d/#"])
    try:
        frame = Frame.from_image(np.zeros((100, 200, 3), np.uint8), "cam", 7, pts=2, time_base=None)
        frame.detections = Detections(xyxy=[[20, 10, 120, 60]], score=[0.9], label=["person"], track_id=[4])
        sink = Mqtt(host=f"127.0.0.1:{broker.port}", topic="d/{source}", qos=1, schema="dlstreamer",
                    tags={"site": "a"}, labels=["background", "person"], instance="shape")
        sink.source_id = "cam"
        with sink:
            sink.write_event("streaming", attempt=1)
            sink(frame)
        deadline = time.monotonic() + 5
        while len(sub.payloads("d/cam")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        event, record = (json.loads(p) for p in sub.payloads("d/cam"))
        assert event["events"] == [{"event-type": "streaming", "attempt": 1}] and event["tags"] == {"site": "a"}
        obj = record["objects"][0]
        assert obj["detection"]["bounding_box"] == {"x_min": 0.1, "y_min": 0.1, "x_max": 0.6, "y_max": 0.6}
        assert obj["detection"]["label_id"] == 1 and obj["id"] == 4
        assert (obj["x"], obj["y"], obj["w"], obj["h"]) == (20, 10, 100, 50)
        assert record["resolution"] == {"width": 200, "height": 100} and record["tags"] == {"site": "a"}
    finally:
        sub.close()


def test_a_source_named_with_a_wildcard_publishes_and_a_refused_message_does_not_stop_the_rest(
        broker: Broker) -> None:
    """MQTT's + and # are for subscribing: in a source's name (a file cam+1.mp4) they become _;
    a message the client refuses anyway is dropped and counted, and the next ones go out."""
    from stages.mqtt import Mqtt

    sub = Subscriber(broker.port, ["w/#"])
    try:
        sink = Mqtt(host=f"127.0.0.1:{broker.port}", topic="w/{source}", qos=1, instance="wild")
        with sink:
            sink(Frame.from_image(np.zeros((10, 10, 3), np.uint8), "cam+1", 0))
            sink.publisher.offer("w/bad/#", "{}", 1)  # as if such a topic had slipped through
            sink(Frame.from_image(np.zeros((10, 10, 3), np.uint8), "cam+1", 1))
            publisher = sink.publisher
        counters = publisher.counters()  # closing waited for the messages to go out
        deadline = time.monotonic() + 5
        while len(sub.payloads("w/cam_1")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [json.loads(p)["seq"] for p in sub.payloads("w/cam_1")] == [0, 1]
        assert counters["dropped"] == 1
    finally:
        sub.close()


def test_sinks_sharing_a_connection_each_count_their_own_messages(broker: Broker) -> None:
    """Two sinks with one client id (two server instances given the same one) share a connection;
    each counts the messages it offered, so that summing the sinks counts every message once."""
    from service.backend import publisher_counters
    from stages.mqtt import Mqtt

    sub = Subscriber(broker.port, ["s/#"])
    try:
        sinks = [Mqtt(host=f"127.0.0.1:{broker.port}", topic="s/{source}", qos=1, instance=f"i{k}",
                      client_id="shared") for k in range(2)]
        image = np.zeros((10, 10, 3), np.uint8)
        with sinks[0], sinks[1]:
            assert sinks[0].publisher is sinks[1].publisher
            for seq in range(30):
                sinks[0](Frame.from_image(image, "a", seq))
                if seq < 12:
                    sinks[1](Frame.from_image(image, "b", seq))
        deadline = time.monotonic() + 5
        while len(sub.payloads("s/a")) + len(sub.payloads("s/b")) < 42 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sub.payloads("s/a")) == 30 and len(sub.payloads("s/b")) == 12
        own = [sink.counters_of_publisher() for sink in sinks]
        assert [(c["produced"], c["sent"], c["dropped"], c["buffered"]) for c in own] == [(30, 30, 0, 0),
                                                                                         (12, 12, 0, 0)]
        assert sinks[0].last_publisher.counters()["sent"] == 42  # the connection's own total

        class Cam:  # a session's camera, as the server's metrics read it
            def __init__(self, sink: Mqtt) -> None:
                self.stages = {"mqtt": sink}

        assert sum(c["sent"] for c in publisher_counters([Cam(s) for s in sinks])) == 42
    finally:
        sub.close()


def test_broker_restart_resumes_publishing_and_counts_losses(broker: Broker, tmp_path: Path) -> None:
    sub = Subscriber(broker.port, ["t/#"])
    count, ms = 400, 20  # 8 s at 50 frames/s
    session = Session(_graph(broker.port, count, ms, buffer=20), RunOptions(output_dir=tmp_path,
                                                                             handle_signals=False))
    try:
        session.add_source("cam")
        cam = session.cameras()[0]
        publisher = cam.stages["mqtt"].publisher
        time.sleep(1.5)
        broker.kill()
        killed_at, frames_at_kill = time.monotonic(), cam.stats.processed
        time.sleep(2.0)
        frames_during = cam.stats.processed - frames_at_kill
        broker.start()
        restarted = time.monotonic()
        before = len(sub.payloads("t/cam"))
        while len(sub.payloads("t/cam")) <= before + 5 and time.monotonic() - restarted < 10:
            time.sleep(0.05)
        resumed_s = time.monotonic() - restarted
        while not session.wait(0.25):
            pass
        counters = publisher.counters() if publisher is not None else None
    finally:
        summary = session.close()
        sub.close()
    assert summary.error is None and summary.sources[0].processed == count
    # the camera never waited for the broker: ~2 s of frames went through while it was down
    assert frames_during >= 0.5 * 2.0 * 1000 / ms, frames_during
    assert resumed_s < 10, f"publishing resumed {resumed_s:.1f} s after the broker came back"
    assert counters is not None and counters["dropped"] > 0
    assert counters["produced"] == count and counters["connects"] >= 2
    seqs = [json.loads(p)["seq"] for p in sub.payloads("t/cam")]
    assert len(seqs) < count and seqs[-1] == count - 1
    distinct = list(dict.fromkeys(seqs))  # QoS 1 may deliver a message twice after a reconnect
    assert distinct == sorted(distinct), "records arrived out of order"
    assert killed_at  # noqa: used for the timeline above


WILL_SCRIPT = """
import sys, time
from stages.mqtt import Mqtt
sink = Mqtt(host=f"127.0.0.1:{sys.argv[1]}", instance="crash")
sink.open()
while not sink.publisher.counters()["connected"]:
    time.sleep(0.05)
print("connected", flush=True)
time.sleep(60)
"""


def test_last_will_marks_a_crashed_publisher_offline(broker: Broker) -> None:
    import sys

    proc = subprocess.Popen([sys.executable, "-c", WILL_SCRIPT, str(broker.port)], stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "connected"
        sub = Subscriber(broker.port, ["vapipe/crash/available"])
        deadline = time.monotonic() + 5
        while sub.payloads("vapipe/crash/available") != [b"online"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sub.payloads("vapipe/crash/available") == [b"online"]
        proc.kill()  # no DISCONNECT: the broker publishes the will
        while sub.payloads("vapipe/crash/available")[-1:] != [b"offline"] and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        assert sub.payloads("vapipe/crash/available")[-1] == b"offline"
        sub.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_unreachable_broker_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    from stages.mqtt import Mqtt, Publisher

    port = free_port()  # nothing listens there
    params = Mqtt.Params(host=f"127.0.0.1:{port}", reconnect_min_s=0.1, reconnect_max_s=0.2)
    with caplog.at_level("WARNING", logger="vapipe.mqtt"):
        pub = Publisher.acquire("127.0.0.1", port, "unreachable", "vapipe/unreachable/available", params)
        try:
            deadline = time.monotonic() + 5
            while not caplog.records and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # several more attempts fail meanwhile
        finally:
            pub.release(0)
    lines = [r.getMessage() for r in caplog.records if "cannot be reached" in r.getMessage()]
    assert lines == [f"MQTT broker 127.0.0.1:{port} cannot be reached; retrying with backoff (up to 1000 messages "
                     "wait)"], [r.getMessage() for r in caplog.records]
