"""The REST API in-process: pipelines, instances and their life, sources at run time."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx

from tests.live.helpers import quiet_stream

from .conftest import SCENE, wait_state


def _start(client, tmp_path: Path, name: str = "scene/1", **body) -> str:
    body.setdefault("source", {"uri": SCENE, "type": "uri"})
    r = client.post(f"/pipelines/{name}", json=body)
    assert r.status_code == 200, r.text
    assert isinstance(r.json(), str)
    return r.json()


def test_pipelines_are_listed_with_versions_and_parameters(client) -> None:
    listed = client.get("/pipelines").json()
    assert {(p["name"], p["version"]) for p in listed} == {("scene", "1"), ("counted", "2")}
    one = client.get("/pipelines/scene/1").json()
    assert one["type"] == "vapipe" and "rate" in one["parameters"]["properties"]
    assert "decode.loop" in one["parameters"]["properties"] and "metadata.path" not in one["parameters"]["properties"]
    missing = client.get("/pipelines/scene/9")
    assert missing.status_code == 404 and "scene/9" in missing.json()["detail"]
    assert "\n" not in missing.json()["detail"]
    assert client.get("/models").status_code == 200


def test_instance_life_file_destination_and_idempotent_stop(client, tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    iid = _start(client, tmp_path, destination={"metadata": {"type": "file", "path": str(out),
                                                             "format": "json-lines"}},
                 tags={"site": "lab"})
    status = client.get(f"/pipelines/{iid}/status").json()
    assert set(status) >= {"id", "state", "avg_fps", "start_time", "elapsed_time", "message"}
    assert isinstance(status["avg_fps"], (int, float)) and isinstance(status["message"], str)
    assert out.exists()  # created at once: clients follow it while the instance runs
    wait_state(client, iid, ("RUNNING",))
    deadline = time.monotonic() + 20
    while client.get(f"/pipelines/status/{iid}").json()["avg_fps"] <= 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    summary = client.get(f"/pipelines/{iid}").json()
    assert summary["request"]["pipeline"] == {"name": "scene", "version": "1"} and summary["id"] == iid
    stopped = client.delete(f"/pipelines/{iid}")
    assert stopped.status_code == 200 and stopped.json()["state"] == "ABORTED"
    again = client.delete(f"/pipelines/{iid}")
    assert again.status_code == 200 and again.json()["state"] == "ABORTED"
    assert client.get(f"/pipelines/status/{iid}").json()["state"] == "ABORTED"  # stays queryable
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records, "no record written"
    assert records[0]["resolution"] == {"width": 320, "height": 240} and records[0]["tags"] == {"site": "lab"}
    assert all(isinstance(r["timestamp"], int) and r["objects"] == [] for r in records)
    assert [r["timestamp"] for r in records] == sorted(r["timestamp"] for r in records)


def test_completed_with_vapipe_schema_and_json_format(make_client, tmp_path: Path) -> None:
    client, manager = make_client()
    out = tmp_path / "all.json"
    iid = _start(client, tmp_path, name="counted/2", source={"uri": "testsrc://list", "type": "uri"},
                 destination={"metadata": {"type": "file", "path": str(out), "format": "json", "schema": "vapipe"}})
    status = wait_state(client, iid, ("COMPLETED", "ERROR"))
    assert status["state"] == "COMPLETED", status["message"]
    assert status["avg_fps"] > 0 and status["elapsed_time"] > 0 and status["sources"][0]["frames"] == 30
    records = json.loads(out.read_text())  # one JSON array, complete once the instance ended
    assert [r["seq"] for r in records] == list(range(30))
    assert all(r["objects"][0]["label"] == "thing" for r in records)
    # a finished instance is kept for its status, without what only a running one needs
    session = manager.get(iid).handle.session
    assert session.costs is None and all(s.frozen for s in session.stage_stats.values())


def test_bad_requests_name_the_field(client, tmp_path: Path) -> None:
    r = client.post("/pipelines/scene/1", json={"source": {"type": "uri"}})
    assert r.status_code == 422 and "source.uri" in r.json()["detail"], r.json()
    r = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}, "parameters": {"nope.x": 1}})
    assert r.status_code == 400 and "parameters.nope.x" in r.json()["detail"]
    r = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}, "parameters": {"decode.fps": -3}})
    assert r.status_code == 400 and "fps" in r.json()["detail"]
    r = client.post("/pipelines/scene/1", json={"source": {"uri": str(tmp_path / "missing.mp4"), "type": "uri"}})
    assert r.status_code == 400 and "missing.mp4" in r.json()["detail"]
    r = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"},
                                                 "destination": {"metadata": {"type": "mqtt", "host": "h:1"}}})
    assert r.status_code == 422 and "topic" in r.json()["detail"]
    assert client.get("/pipelines/status/nope").status_code == 404
    assert client.delete("/pipelines/nope").status_code == 404
    r = client.post("/pipelines/nope/1", json={"source": {"type": "uri"}})  # the pipeline before the body
    assert r.status_code == 404 and "nope" in r.json()["detail"], r.json()
    r = client.post("/pipelines/nope/1", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith("request body: malformed JSON"), r.json()


def test_max_running_queues_the_rest(make_client, tmp_path: Path) -> None:
    client, _ = make_client(max_running=1)
    first = _start(client, tmp_path)
    wait_state(client, first, ("RUNNING",))
    second = _start(client, tmp_path)
    time.sleep(0.5)
    queued = client.get(f"/pipelines/status/{second}").json()
    assert queued["state"] == "QUEUED" and queued["avg_fps"] == 0 and queued["start_time"] == 0
    client.delete(f"/pipelines/{first}")
    wait_state(client, second, ("RUNNING",))
    third = _start(client, tmp_path)
    assert client.delete(f"/pipelines/{third}").json()["state"] == "ABORTED"  # never started
    client.delete(f"/pipelines/{second}")


def test_the_instances_stopped_last_are_kept(make_client, tmp_path: Path) -> None:
    """Of the stopped instances, the server keeps the ``keep_finished`` that stopped last,
    whenever they were created."""
    client, manager = make_client()
    manager.keep_finished = 2
    early = _start(client, tmp_path)
    wait_state(client, early, ("RUNNING",))
    short = [_start(client, tmp_path, "counted/2", source={"uri": "testsrc://list", "type": "uri"})
             for _ in range(2)]
    for iid in short:
        wait_state(client, iid, ("COMPLETED",))
    assert client.delete(f"/pipelines/{early}").json()["state"] == "ABORTED"
    last = _start(client, tmp_path, "counted/2", source={"uri": "testsrc://list", "type": "uri"})
    wait_state(client, last, ("COMPLETED",))
    newest = _start(client, tmp_path, "counted/2", source={"uri": "testsrc://list", "type": "uri"})
    assert {s["id"] for s in client.get("/pipelines/status").json()} == {early, last, newest}
    assert client.get(f"/pipelines/status/{early}").json()["state"] == "ABORTED"


def test_declared_parameter_sets_the_stage(client, tmp_path: Path) -> None:
    iid = _start(client, tmp_path, parameters={"rate": 10})
    wait_state(client, iid, ("RUNNING",))
    time.sleep(3.0)
    fps = client.get(f"/pipelines/status/{iid}").json()["avg_fps"]
    client.delete(f"/pipelines/{iid}")
    assert 8.0 < fps < 12.0, fps  # paced at the declared rate (default 25)


def test_sources_added_and_removed_while_running(client, tmp_path: Path) -> None:
    iid = _start(client, tmp_path)
    wait_state(client, iid, ("RUNNING",))
    added = client.post(f"/pipelines/{iid}/sources", json={"uri": "testsrc://bars?width=160&height=120"})
    assert added.status_code == 200, added.text
    sid = added.json()["id"]
    time.sleep(1.5)
    sources = {s["id"]: s for s in client.get(f"/pipelines/{iid}/status").json()["sources"]}
    assert len(sources) == 2 and sources[sid]["frames"] > 0
    first = next(k for k in sources if k != sid)
    removed = client.delete(f"/pipelines/{iid}/sources/{sid}")
    assert removed.status_code == 200 and [s["id"] for s in removed.json()["sources"]] == [first]
    before = removed.json()["sources"][0]["frames"]
    time.sleep(1.0)
    after = client.get(f"/pipelines/{iid}/status").json()
    assert after["state"] == "RUNNING" and after["sources"][0]["frames"] > before
    assert client.delete(f"/pipelines/{iid}/sources/{sid}").status_code == 404
    idle = client.delete(f"/pipelines/{iid}/sources/{first}").json()
    assert idle["state"] == "RUNNING" and idle["sources"] == []  # waits for the next camera
    time.sleep(0.5)
    assert client.get(f"/pipelines/{iid}/status").json()["state"] == "RUNNING"
    again = client.post(f"/pipelines/{iid}/sources", json={"uri": SCENE}).json()["id"]
    assert again not in (first, sid)  # ids are never reused within an instance
    client.delete(f"/pipelines/{iid}")
    assert client.post(f"/pipelines/{iid}/sources", json={"uri": SCENE}).status_code == 409


def test_malformed_bodies_and_uris_name_the_field(client, tmp_path: Path) -> None:
    def detail(r, status: int) -> str:
        assert r.status_code == status, r.text
        return r.json()["detail"]

    broken = client.post("/pipelines/scene/1", content=b'{"source": {"uri": "x"', headers={"Content-Type":
                                                                                         "application/json"})
    assert detail(broken, 422).startswith("request body: malformed JSON at character 22")
    typed = client.post("/pipelines/scene/1", json={"source": {"uri": 5, "type": "uri"}})
    assert detail(typed, 422) == "source.uri: Input should be a valid string"
    topic = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}, "destination": {
        "metadata": {"type": "mqtt", "host": "h:1", "topic": 5}}})
    assert detail(topic, 422).startswith("destination.metadata.topic: ")
    for params, field in (({"decode.fps": -3}, "parameters.decode.fps: "), ({"rate": "fast"}, "parameters.rate: ")):
        r = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}, "parameters": params})
        assert detail(r, 400).startswith(field) and "request:" not in r.json()["detail"], r.json()
    host = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}, "destination": {
        "metadata": {"type": "mqtt", "host": "h:abc", "topic": "t"}}})
    assert detail(host, 400).startswith("destination.metadata.host: ")
    for bad in ("site/+/cams", "site/#", "a/{bad"):  # wildcards are for subscribing; a template that cannot fill
        r = client.post("/pipelines/scene/1", json={"source": {"uri": SCENE, "type": "uri"}, "destination": {
            "metadata": {"type": "mqtt", "host": "h:1", "topic": bad}}})
        assert detail(r, 400).startswith("destination.metadata.topic: ") and repr(bad) in r.json()["detail"]
    for uri in ("http://[::1", "rtsp://cam:abc/x"):
        r = client.post("/pipelines/scene/1", json={"source": {"uri": uri, "type": "uri"}})
        assert detail(r, 400).startswith(f"source.uri {uri!r}: "), r.json()


def test_a_camera_that_is_down_says_why_in_its_status(client, tmp_path: Path) -> None:
    from tests.live.helpers import free_port

    url = f"rtsp://user:secret@127.0.0.1:{free_port()}/cam"  # nothing listens there
    iid = _start(client, tmp_path, source={"uri": url, "type": "uri"},
                 parameters={"decode.reconnect": {"initial_s": 0.2, "max_s": 0.5}})
    deadline = time.monotonic() + 30
    while True:
        status = client.get(f"/pipelines/status/{iid}").json()
        source = (status["sources"] or [{}])[0]
        if source.get("state") == "reconnecting" and source["reason"]:
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert source["reason"].startswith("cannot open source rtsp://***@127.0.0.1:"), source  # no password
    assert "secret" not in json.dumps(source)
    client.delete(f"/pipelines/{iid}")


def test_stopping_an_instance_that_is_still_starting_answers_at_once(client, tmp_path: Path) -> None:
    """A first start compiles and times the models (seconds); a stop meanwhile does not wait for it."""
    iid = _start(client, tmp_path, name="counted/2", parameters={"infer.open_ms": 8_000})
    time.sleep(0.5)  # inside the stage's open
    assert client.get(f"/pipelines/status/{iid}").json()["state"] == "QUEUED"
    t0 = time.monotonic()
    stopped = client.delete(f"/pipelines/{iid}")
    assert time.monotonic() - t0 < 3.0
    assert stopped.status_code == 200 and stopped.json()["state"] == "ABORTED", stopped.text
    assert stopped.json()["message"] == ""


def test_stopping_an_instance_while_a_source_it_adds_opens_answers_both_at_once(live_server, tmp_path: Path) -> None:
    """``live: false`` opens an added stream in the request; stopping the instance meanwhile
    neither waits for the open timeout nor starts the camera."""
    api = httpx.Client(base_url=live_server.url, timeout=60)
    iid = _start(api, tmp_path, parameters={"decode.live": False, "decode.open_timeout_s": 20})
    wait_state(api, iid, ("RUNNING",))
    client_closed, done, requested = threading.Event(), threading.Event(), threading.Event()
    url = quiet_stream(b"", client_closed, done, requested)  # answers the request, then sends nothing
    added: list[httpx.Response] = []
    adder = threading.Thread(target=lambda: added.append(api.post(f"/pipelines/{iid}/sources", json={"uri": url})))
    try:
        adder.start()
        assert requested.wait(30)
        time.sleep(0.3)  # inside the open (open timeout 20 s)
        t0 = time.monotonic()
        stopped = api.delete(f"/pipelines/{iid}")
        adder.join(10)
        assert time.monotonic() - t0 < 5.0
    finally:
        done.set()
        api.close()
    assert stopped.status_code == 200 and stopped.json()["state"] in ("COMPLETED", "ABORTED")
    assert [s["uri"] for s in stopped.json()["sources"]] == [SCENE]  # the added camera never started
    [answer] = added
    assert answer.status_code == 409 and "stopped while the source opened" in answer.json()["detail"], answer.text
