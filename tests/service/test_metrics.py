"""/metrics: valid for promtool, and the frame counter's rate agrees with the status avg_fps."""

from __future__ import annotations

import subprocess
import threading
import time

from prometheus_client.parser import text_string_to_metric_families

from tests.debian import need

from .conftest import SCENE, wait_state


def _samples(text: str, name: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_promtool_accepts_the_metrics_and_rate_matches_avg_fps(client) -> None:
    promtool = need("promtool", "prometheus")
    iid = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}}).json()
    wait_state(client, iid, ("RUNNING",))
    deadline = time.monotonic() + 20
    while client.get(f"/pipelines/status/{iid}").json()["avg_fps"] <= 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    t1, first = time.monotonic(), client.get("/metrics").text
    time.sleep(4.0)
    t2, second = time.monotonic(), client.get("/metrics").text
    avg_fps = client.get(f"/pipelines/status/{iid}").json()["avg_fps"]
    client.delete(f"/pipelines/{iid}")

    frames1 = sum(_samples(first, "vapipe_frames_total").values())
    frames2 = sum(_samples(second, "vapipe_frames_total").values())
    rate = (frames2 - frames1) / (t2 - t1)
    assert abs(rate - avg_fps) <= 0.1 * avg_fps, (rate, avg_fps)

    check = subprocess.run([promtool, "check", "metrics"], input=second, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "" and check.stderr.strip() == "", check.stdout + check.stderr  # no lint warning
    states = _samples(second, "vapipe_source_state")
    assert [dict(k)["state"] for k, v in states.items() if v == 1] == ["streaming"]
    assert _samples(second, "vapipe_thread_plan_info")
    buckets = _samples(second, "vapipe_stage_latency_seconds_bucket")
    bounds = sorted({float(dict(k)["le"]) for k in buckets})
    assert bounds[0] == 0.001 and bounds[-2] == 2.0 and bounds[-1] == float("inf")
    for name in ("vapipe_dropped_frames_total", "vapipe_decode_errors_total", "vapipe_reconnects_total",
                 "vapipe_queue_depth", "vapipe_frame_latency_seconds_count"):
        assert _samples(second, name), name


def test_a_broker_outage_shows_as_buffered_and_dropped_messages(make_client) -> None:
    from tests.live.helpers import free_port

    pipelines = f"""
pipelines:
  published:
    stages:
      - {{name: decode, type: decode, params: {{realtime: true, loop: true, fps: 50}}}}
      - {{name: mqtt, type: mqtt, params: {{host: "127.0.0.1:{free_port()}", buffer: 20}}}}
"""
    client, _ = make_client(pipelines=pipelines)  # nothing listens at the broker's port
    iid = client.post("/pipelines/published/1", json={"source": {"uri": SCENE, "type": "uri"}}).json()
    wait_state(client, iid, ("RUNNING",))
    deadline = time.monotonic() + 20
    while True:
        text = client.get("/metrics").text
        dropped = _samples(text, "vapipe_mqtt_messages_total")
        if sum(v for k, v in dropped.items() if dict(k)["outcome"] == "dropped") > 0:
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    client.delete(f"/pipelines/{iid}")
    assert list(_samples(text, "vapipe_mqtt_buffered_messages").values()) == [20.0]  # full: the rest dropped
    assert list(_samples(text, "vapipe_mqtt_connected").values()) == [0.0]
    assert sum(v for k, v in dropped.items() if dict(k)["outcome"] == "sent") == 0
    # once the instance ended, its totals stay, with the 20 messages the close could not send
    produced = client.get(f"/pipelines/status/{iid}").json()["sources"][0]["frames"]
    after = client.get("/metrics").text
    outcomes = {dict(k)["outcome"]: v for k, v in _samples(after, "vapipe_mqtt_messages_total").items()}
    assert outcomes["sent"] == 0 and outcomes["dropped"] == produced, (outcomes, produced)
    assert _samples(after, "vapipe_source_fps") and set(_samples(after, "vapipe_source_fps").values()) == {0.0}


def test_the_messages_of_a_removed_source_stay_in_its_instance_totals(make_client) -> None:
    from tests.live.helpers import free_port

    pipelines = f"""
pipelines:
  published:
    stages:
      - {{name: decode, type: decode, params: {{realtime: true, fps: 50}}}}
      - {{name: mqtt, type: mqtt, params: {{host: "127.0.0.1:{free_port()}", buffer: 5}}}}
"""
    client, _ = make_client(pipelines=pipelines)  # nothing listens at the broker's port
    iid = client.post("/pipelines/published/1", json={"source": {"uri": "testsrc://bars?width=64&height=48",
                                                                 "type": "uri"}}).json()
    wait_state(client, iid, ("RUNNING",))
    added = client.post(f"/pipelines/{iid}/sources", json={"uri": "testsrc://bars?width=64&height=48&frames=10"})
    sid = added.json()["id"]
    deadline = time.monotonic() + 20
    while next(s for s in client.get(f"/pipelines/status/{iid}").json()["sources"] if s["id"] == sid)["state"] \
            != "ended":
        assert time.monotonic() < deadline
        time.sleep(0.05)

    def outcomes() -> dict[str, float]:
        return {dict(k)["outcome"]: v for k, v in _samples(client.get("/metrics").text,
                                                           "vapipe_mqtt_messages_total").items()}

    before = outcomes()
    assert client.delete(f"/pipelines/{iid}/sources/{sid}").status_code == 200
    after = outcomes()
    client.delete(f"/pipelines/{iid}")
    frames = client.get(f"/pipelines/status/{iid}").json()["sources"][0]["frames"]
    assert after["dropped"] >= before["dropped"] >= 10, (before, after)
    assert outcomes() == {"sent": 0, "dropped": frames + 10}


def test_an_instance_whose_sources_were_all_replaced_reads_its_new_connection(make_client, tmp_path) -> None:
    """Removing the only source closes its MQTT connection; the next source opens another, which
    ``vapipe_mqtt_connected`` reads, and the messages sent before stay counted."""
    from tests.stages.test_mqtt import Broker

    broker = Broker(need("mosquitto", "mosquitto"), tmp_path)
    broker.start()
    try:
        pipelines = f"""
pipelines:
  published:
    stages:
      - {{name: decode, type: decode, params: {{realtime: true, fps: 50}}}}
      - {{name: mqtt, type: mqtt, params: {{host: "127.0.0.1:{broker.port}"}}}}
"""
        client, _ = make_client(pipelines=pipelines)
        uri = "testsrc://bars?width=64&height=48"

        def sample(name: str, **labels: str) -> float:
            return sum(v for k, v in _samples(client.get("/metrics").text, name).items()
                       if labels.items() <= dict(k).items())

        def wait_sent(more_than: float) -> None:
            deadline = time.monotonic() + 20
            while sample("vapipe_mqtt_messages_total", outcome="sent") <= more_than:
                assert time.monotonic() < deadline
                time.sleep(0.05)

        iid = client.post("/pipelines/published/1", json={"source": {"uri": uri, "type": "uri"}}).json()
        wait_state(client, iid, ("RUNNING",))
        wait_sent(0)
        first = client.get(f"/pipelines/status/{iid}").json()["sources"][0]["id"]
        assert client.delete(f"/pipelines/{iid}/sources/{first}").status_code == 200
        sent = sample("vapipe_mqtt_messages_total", outcome="sent")
        assert sent > 0 and sample("vapipe_mqtt_connected") == 0.0  # no source: no connection
        assert client.post(f"/pipelines/{iid}/sources", json={"uri": uri}).status_code == 200
        wait_sent(sent)
        assert sample("vapipe_mqtt_connected") == 1.0
    finally:
        broker.kill()


def test_a_source_that_is_not_streaming_runs_at_no_rate(make_client, tmp_path) -> None:
    """``vapipe_source_fps`` is the rate a source runs at: 0 while its stream is down, where the
    status's ``avg_fps`` stays the average over the frames it had."""
    from tests.cluster.helpers import make_clip
    from tests.live.helpers import quiet_stream

    pipelines = """
pipelines:
  cam:
    stages:
      - {name: decode, type: decode, params: {read_timeout_s: 0.5}}
"""
    client, _ = make_client(pipelines=pipelines)
    closed, done = threading.Event(), threading.Event()
    url = quiet_stream(make_clip(tmp_path / "cam.ts", 25, size=(160, 120)).read_bytes(), closed, done)
    try:
        iid = client.post("/pipelines/cam/1", json={"source": {"uri": url, "type": "uri"}}).json()
        deadline = time.monotonic() + 20
        while True:  # its one connection sent its frames, then went quiet: it never streams again
            sources = client.get(f"/pipelines/status/{iid}").json()["sources"]
            if sources and sources[0]["frames"] > 0 and sources[0]["state"] != "streaming":
                break
            assert time.monotonic() < deadline, sources
            time.sleep(0.05)
        text = client.get("/metrics").text
        status = client.get(f"/pipelines/status/{iid}").json()
    finally:
        done.set()
    assert status["state"] == "RUNNING" and status["sources"][0]["state"] in ("connecting", "reconnecting", "stalled")
    assert list(_samples(text, "vapipe_source_fps").values()) == [0.0]
    assert status["avg_fps"] > 0
