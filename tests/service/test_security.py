"""What the API refuses: files outside --allow-dir, odd schemes, file parameters, big bodies,
missing tokens, user stages; credentials never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import SCENE, wait_state


def _post(client, **body):
    body.setdefault("source", {"uri": SCENE, "type": "uri"})
    return client.post("/pipelines/scene/1", json=body)


@pytest.mark.parametrize("uri", ["/etc/hostname", "file:///etc/hostname", "file://otherhost/tmp/x.mp4",
                                 "{d}/../../etc/hostname", "file://{d}/%2e%2e/%2e%2e/etc/hostname",
                                 "concat:/etc/hostname|/etc/hostname", "subfile:,start,0,end,10,:/etc/hostname",
                                 "{d}/link.mp4"])
def test_sources_outside_the_allowed_directories_are_refused(client, tmp_path: Path, uri: str) -> None:
    (tmp_path / "link.mp4").symlink_to("/etc/hostname")
    r = _post(client, source={"uri": uri.format(d=tmp_path), "type": "uri"})
    assert r.status_code == 403, r.text
    assert client.get("/pipelines/status").json() == []


@pytest.mark.parametrize("path", ["/tmp/vapipe-forbidden-{pid}.jsonl", "{d}/../vapipe-forbidden-{pid}.jsonl",
                                  "{d}/out-link/x.jsonl"])
def test_destinations_outside_are_refused_and_nothing_is_created(client, tmp_path: Path, path: str) -> None:
    outside = tmp_path.parent / f"outside-{os.getpid()}"
    outside.mkdir(exist_ok=True)
    (tmp_path / "out-link").symlink_to(outside)
    target = path.format(d=tmp_path, pid=os.getpid())
    r = _post(client, destination={"metadata": {"type": "file", "path": target}})
    assert r.status_code == 403, r.text
    assert not Path(os.path.realpath(target)).exists() and not any(outside.iterdir())


def test_a_destination_never_writes_over_a_file_that_is_not_json(client, tmp_path: Path) -> None:
    """Inside --allow-dir too: a video (or any other file) is not a place for results."""
    video = tmp_path / "recording.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(1000))
    for fmt in ("json", "json-lines"):
        r = _post(client, destination={"metadata": {"type": "file", "path": str(video), "format": fmt}})
        assert r.status_code == 400 and "exists and is not a JSON file" in r.json()["detail"], r.text
    assert video.read_bytes()[4:8] == b"ftyp" and video.stat().st_size == 1012
    kept = tmp_path / "kept.jsonl"
    kept.write_text('{"seq": 0}\n')  # results already: may be appended to
    r = _post(client, destination={"metadata": {"type": "file", "path": str(kept), "format": "json-lines"}})
    assert r.status_code == 200, r.text
    assert client.get("/pipelines/status").json()[0]["id"] == r.json()


@pytest.mark.parametrize("case", ["file as folder", "long destination", "long source"])
def test_paths_the_file_system_refuses_are_a_400_naming_the_field(client, tmp_path: Path, case: str) -> None:
    (tmp_path / "a-file").write_text("x")
    long = "a" * 300
    body = {"file as folder": {"destination": {"metadata": {"type": "file", "path": f"{tmp_path}/a-file/x.jsonl"}}},
            "long destination": {"destination": {"metadata": {"type": "file", "path": f"{tmp_path}/{long}.jsonl"}}},
            "long source": {"source": {"uri": f"{tmp_path}/{long}.mp4", "type": "uri"}}}[case]
    r = _post(client, **body)
    assert r.status_code == 400, r.text
    field = "source.uri" if case == "long source" else "destination.metadata.path"
    assert r.json()["detail"].startswith(field), r.text
    assert client.get("/pipelines/status").json() == []


@pytest.mark.parametrize("key, value", [("metadata.path", "/tmp/x.jsonl"), ("decode.uri", "/etc/hostname"),
                                        ("metadata.output_dir", "/tmp")])
def test_file_parameters_cannot_be_set(client, key: str, value: str) -> None:
    r = _post(client, parameters={key: value})
    assert r.status_code in (400, 403), r.text
    assert key.split(".")[1] in r.json()["detail"]


def test_bodies_over_64_kib_get_413(client) -> None:
    r = _post(client, tags={"pad": "x" * 70_000})
    assert r.status_code == 413
    r = client.post("/pipelines/scene/1", content=b"{" + b" " * 70_000 + b"}",
                    headers={"content-type": "application/json", "transfer-encoding": "chunked"})
    assert r.status_code == 413


def test_token_is_required_on_every_route_but_healthz(make_client, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-0123456789\n")
    client, _ = make_client(token_file=token_file)
    assert client.get("/healthz").status_code == 200
    assert client.head("/healthz").status_code == 200  # load balancers probe with HEAD
    for path in ("/", "/pipelines", "/pipelines/status", "/metrics", "/openapi.json"):
        r = client.get(path)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
    assert client.get("/pipelines", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = client.get("/pipelines", headers={"Authorization": "Bearer s3cret-token-0123456789"})
    assert ok.status_code == 200
    login = client.get("/?token=s3cret-token-0123456789", follow_redirects=False)
    assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
    assert client.get("/pipelines").status_code == 200  # the browser's cookie


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    from service.cli import serve_app

    from .conftest import serve_args

    with pytest.raises(ValueError, match="--token-file"):
        serve_app(serve_args(tmp_path, host="0.0.0.0"))


def test_user_stages_need_the_flag(make_client) -> None:
    client, _ = make_client(allow_user_stages=False)
    assert [p["name"] for p in client.get("/pipelines").json()] == ["scene"]
    r = client.post("/pipelines/counted/2", json={"source": {"uri": SCENE, "type": "uri"}})
    assert r.status_code == 404


def test_log_records_are_redacted() -> None:
    import logging

    from service.security import RedactingFilter

    record = logging.LogRecord("vapipe.source", logging.INFO, __file__, 1, "%s: stalled", ("rtsp://u:pw@h/cam",),
                               None)
    RedactingFilter().filter(record)
    assert record.getMessage() == "rtsp://***@h/cam: stalled"


def test_credentials_are_redacted_in_status_and_metrics(client) -> None:
    r = _post(client, source={"uri": "rtsp://admin:hunter2@127.0.0.1:9/cam", "type": "uri"},
              parameters={"decode.open_timeout_s": 0.5, "decode.reconnect": {"max_attempts": 1}})
    assert r.status_code == 200, r.text
    iid = r.json()
    wait_state(client, iid, ("RUNNING", "ERROR"))
    texts = [client.get(f"/pipelines/status/{iid}").text, client.get(f"/pipelines/{iid}").text,
             client.get("/metrics").text, client.get("/pipelines/status").text]
    assert all("hunter2" not in t for t in texts)
    assert "***@127.0.0.1" in texts[1]
    client.delete(f"/pipelines/{iid}")
    r = _post(client, source={"uri": "rtsp://admin:hunter2@127.0.0.1:9", "type": "uri"},
              parameters={"decode.open_timeout_s": 0.5, "decode.reconnect": {"max_attempts": 1}})
    iid = r.json()
    wait_state(client, iid, ("RUNNING", "ERROR"))
    assert "hunter2" not in client.get("/metrics").text + client.get(f"/pipelines/status/{iid}").text
    client.delete(f"/pipelines/{iid}")
