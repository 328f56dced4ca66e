"""The FastAPI application: DL Streamer Pipeline Server's REST routes, sources at run time,
``/metrics``, the live page and MJPEG views.

Errors are ``{"detail": ONE LINE}``: 400 bad values, 401 missing token, 403 outside
what the server allows, 404 unknown pipeline/instance/source, 409 wrong state,
413 body over 64 KiB, 422 malformed body (naming the field), 501 not available for
this instance (live pictures of cameras on a cluster).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable

from fastapi import Body, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError

from pipeline.runtime import StageFailure

from .catalog import Catalog, PipelineNotFound
from .instances import Conflict, Instance, InstanceManager, InstanceNotFound
from .metrics import make_registry
from .models import (ErrorBody, InstanceStatus, InstanceSummary, ModelInfo, PipelineInfo, PipelineRequest,
                     SourceAdded, SourceRequest)
from .security import Forbidden, Guard, redact

__all__ = ["create_app", "MAX_BODY"]

log = logging.getLogger("vapipe.serve")
MAX_BODY = 64 * 1024
PAGE = Path(__file__).with_name("page.html")
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 403, 404, 413, 422)}
_STATE_ERRORS: dict[int | str, dict[str, Any]] = {**_ERRORS, 409: {"model": ErrorBody}}
BOUNDARY = "vapipeframe"


def _error(status: int, text: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": redact(text.strip().splitlines()[0] if text.strip() else "error")},
                        status_code=status, headers=headers)


class BodyLimit:
    """ASGI middleware: request bodies over ``limit`` bytes get 413 before the app reads them."""

    def __init__(self, app: Any, limit: int = MAX_BODY) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _error(413, f"request body over {self.limit // 1024} KiB")(scope, receive, send)
            return
        chunks, total, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > self.limit:
                await _error(413, f"request body over {self.limit // 1024} KiB")(scope, receive, send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class TokenAuth:
    """ASGI middleware: with a token, every route but /healthz needs ``Authorization: Bearer TOKEN``
    (or the cookie a browser gets from ``/?token=TOKEN``, HttpOnly and SameSite=Strict)."""

    def __init__(self, app: Any, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http" or self.guard.token is None or scope["path"] == "/healthz":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else request.cookies.get("vapipe_token")
        login = request.query_params.get("token") if scope["path"] == "/" else None
        if login is not None:
            if not self.guard.token_ok(login):
                response: Response = _error(401, "wrong token", {"WWW-Authenticate": "Bearer"})
            else:
                response = RedirectResponse("/", status_code=303)
                response.set_cookie("vapipe_token", login, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        if not self.guard.token_ok(token):
            await _error(401, "missing or wrong token: send 'Authorization: Bearer TOKEN' (browsers: open "
                              "/?token=TOKEN once)", {"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(catalog: Catalog, manager: InstanceManager, guard: Guard) -> FastAPI:
    app = FastAPI(title="vapipe", version="1", description="Video analytics pipelines as a service: DL Streamer "
                  "Pipeline Server's REST API, sources at run time, metrics and a live view.")
    registry = make_registry(manager)
    app.state.closing = threading.Event()  # set when the server shuts down: live views end

    # errors ---------------------------------------------------------------------------------------
    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        if err.get("type") == "json_invalid":
            at = next((p for p in err.get("loc", ()) if isinstance(p, int)), None)
            where = f" at character {at}" if at is not None else ""
            return _error(422, f"request body: malformed JSON{where} ({err.get('ctx', {}).get('error', 'invalid')})")
        loc = ".".join(str(p) for p in _field_path(tuple(err.get("loc", ()))))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if not loc:
            return _error(422, f"request body: {msg} (send JSON with Content-Type: application/json)")
        return _error(422, f"{loc}: {msg}" if not msg.startswith(loc) else msg)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # the methods of the path's own template (all its routes)
            routes = [r for r in app.routes if isinstance(r, APIRoute)]
            first = next((r for r in routes if r.path_regex.match(request.url.path)), None)
            methods = {m for r in routes if first is not None and r.path == first.path for m in r.methods}
            headers["Allow"] = ", ".join(sorted(methods - {"HEAD"}))
        return _error(exc.status_code, str(exc.detail), headers)

    handlers: list[tuple[type[BaseException], int]] = [(PipelineNotFound, 404), (InstanceNotFound, 404),
                                                        (Forbidden, 403), (Conflict, 409), (StageFailure, 400),
                                                        (ValueError, 400), (NotImplementedError, 501)]
    for exc_type, status in handlers:
        async def handler(_request: Request, exc: Exception, status: int = status) -> JSONResponse:
            return _error(status, str(exc))
        app.add_exception_handler(exc_type, handler)

    # service ------------------------------------------------------------------------------------------
    @app.api_route("/healthz", methods=["GET", "HEAD"], tags=["service"])  # load balancers probe with HEAD
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", response_class=HTMLResponse, tags=["service"], include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(PAGE.read_text(encoding="utf-8"))

    @app.get("/metrics", tags=["service"], response_class=Response,
             responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/models", response_model=list[ModelInfo], tags=["pipelines"])
    def models() -> list[ModelInfo]:
        from pipeline.model_catalog import MODELS

        return [ModelInfo(name=name, version="1", type="OpenVINO", description=f"{name} ({spec.wheel.requirement})")
                for name, spec in MODELS.items()]

    @app.get("/pipelines", response_model=list[PipelineInfo], tags=["pipelines"])
    def pipelines() -> list[dict[str, Any]]:
        return [catalog.describe(s) for s in catalog.specs()]

    # instances: status first (their paths would otherwise match /pipelines/{name}/{version}) ---------
    @app.get("/pipelines/status", response_model=list[InstanceStatus], tags=["instances"])
    def all_status() -> list[dict[str, Any]]:
        return [i.status() for i in manager.all()]

    @app.get("/pipelines/status/{instance_id}", response_model=InstanceStatus, responses=_ERRORS, tags=["instances"])
    def status(instance_id: str) -> dict[str, Any]:
        return manager.get(instance_id).status()

    @app.get("/pipelines/{instance_id}/status", response_model=InstanceStatus, responses=_ERRORS,
             tags=["instances"])
    def status_by_path(instance_id: str) -> dict[str, Any]:
        return manager.get(instance_id).status()

    # The body is checked after the instance: POST /pipelines/NAME/sources is also the path of a
    # pipeline NAME with version "sources", whose body is a pipeline request (404, not 422).
    @app.post("/pipelines/{instance_id}/sources", response_model=SourceAdded, responses=_STATE_ERRORS,
              tags=["sources"], openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": SourceRequest.model_json_schema()}}}})
    def add_source(instance_id: str, raw: dict[str, Any] = Body(...)) -> SourceAdded:
        manager.get(instance_id)
        try:
            body = SourceRequest.model_validate(raw)
        except ValidationError as exc:
            raise RequestValidationError(exc.errors()) from None
        uri = _checked_source(guard, body.uri, "uri")
        return SourceAdded(id=manager.add_source(instance_id, uri))

    @app.get("/pipelines/{instance_id}/sources", response_model=list[dict[str, Any]], responses=_ERRORS,
             tags=["sources"])
    def list_sources(instance_id: str) -> list[dict[str, Any]]:
        return manager.get(instance_id).status()["sources"]

    @app.delete("/pipelines/{instance_id}/sources/{source_id}", response_model=InstanceStatus,
                responses=_STATE_ERRORS, tags=["sources"])
    def remove_source(instance_id: str, source_id: str) -> dict[str, Any]:
        manager.remove_source(instance_id, source_id)
        return manager.get(instance_id).status()

    @app.get("/pipelines/{instance_id}", response_model=InstanceSummary, responses=_ERRORS, tags=["instances"])
    def summary(instance_id: str) -> dict[str, Any]:
        return manager.get(instance_id).summary()

    @app.delete("/pipelines/{instance_id}", response_model=InstanceStatus, responses=_ERRORS, tags=["instances"])
    def stop(instance_id: str) -> dict[str, Any]:
        return manager.stop(instance_id).status()

    # pipelines ----------------------------------------------------------------------------------------
    @app.get("/pipelines/{name}/{version}", response_model=PipelineInfo, responses=_ERRORS, tags=["pipelines"])
    def pipeline(name: str, version: str) -> dict[str, Any]:
        return catalog.describe(catalog.get(name, version))

    def known_pipeline(name: str, version: str) -> None:
        catalog.get(name, version)

    # An unknown pipeline is 404 whatever JSON the body holds: FastAPI runs dependencies before it validates
    # the body.  A body that is not JSON is 422 first: FastAPI parses it before it runs them.
    @app.post("/pipelines/{name}/{version}", response_model=str, responses=_ERRORS, tags=["pipelines"],
              dependencies=[Depends(known_pipeline)])
    def start(name: str, version: str, body: PipelineRequest) -> str:
        return _start(catalog, manager, guard, name, version, body).id

    @app.get("/pipelines/{name}/{version}/{instance_id}", response_model=InstanceSummary, responses=_ERRORS,
             tags=["instances"])
    def summary_long(name: str, version: str, instance_id: str) -> dict[str, Any]:
        return _matching(manager, name, version, instance_id).summary()

    @app.get("/pipelines/{name}/{version}/{instance_id}/status", response_model=InstanceStatus, responses=_ERRORS,
             tags=["instances"])
    def status_long(name: str, version: str, instance_id: str) -> dict[str, Any]:
        return _matching(manager, name, version, instance_id).status()

    @app.delete("/pipelines/{name}/{version}/{instance_id}", response_model=InstanceStatus, responses=_ERRORS,
                tags=["instances"])
    def stop_long(name: str, version: str, instance_id: str) -> dict[str, Any]:
        _matching(manager, name, version, instance_id)
        return manager.stop(instance_id).status()

    # live view ----------------------------------------------------------------------------------------
    @app.get("/live/{instance_id}/{source_id}", tags=["live"], response_class=StreamingResponse,
             responses={200: {"content": {f"multipart/x-mixed-replace; boundary={BOUNDARY}": {}},
                              "description": "MJPEG of the annotated frames"}, **_ERRORS,
                        501: {"model": ErrorBody, "description": "no live pictures (cameras on a cluster)"}})
    async def live(instance_id: str, source_id: str, request: Request) -> StreamingResponse:
        inst = manager.get(instance_id)
        if inst.handle is None:
            raise InstanceNotFound(f"instance {instance_id} has no running source {source_id!r}")
        if inst.handle.finished():  # nothing will come: say so rather than send an empty stream
            raise Conflict(f"instance {instance_id} has ended ({inst.state}); no live pictures")
        try:
            watch = inst.handle.watch(source_id)
        except KeyError:
            raise InstanceNotFound(f"instance {instance_id} has no source {source_id!r}") from None

        async def parts() -> Any:
            version = -1
            try:
                while not app.state.closing.is_set() and not await request.is_disconnected():
                    pic = await watch.next(version, 0.5)
                    if pic is None:
                        if inst.handle is None or inst.handle.finished():
                            return
                        continue
                    version = pic.version
                    head = (f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(pic.jpeg)}\r\n"
                            f"X-Frame-Seq: {pic.seq}\r\nX-Captured-Monotonic-Ns: {pic.captured_ns}\r\n\r\n")
                    yield head.encode() + pic.jpeg + b"\r\n"
            finally:
                watch.close()

        return StreamingResponse(parts(), media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}",
                                 headers={"Cache-Control": "no-store"})

    app.add_middleware(BodyLimit, limit=MAX_BODY)
    app.add_middleware(TokenAuth, guard=guard)
    return app


#: tags of the request's discriminated unions, which pydantic puts in an error's location
_UNION_TAGS: dict[str, tuple[str, ...]] = {"source": ("uri", "webcam"), "metadata": ("file", "mqtt")}


def _field_path(loc: tuple[Any, ...]) -> list[Any]:
    """An error location as the client names the field: no ``body``, no union tag
    (``source.uri.uri`` is ``source.uri``)."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if part == "body" and i == 0:
            continue
        if out and i + 1 < len(loc) and part in _UNION_TAGS.get(str(out[-1]), ()):
            continue
        out.append(part)
    return out


def _checked_source(guard: Guard, uri: str, field: str) -> str:
    path_or_uri = guard.source_uri(uri, field)
    if path_or_uri.startswith("/") and not path_or_uri.startswith("/dev/video"):
        try:
            found = Path(path_or_uri).exists()
        except OSError as exc:  # e.g. a name too long for the file system
            raise ValueError(f"{field} {uri!r}: {exc.strerror or exc}") from None
        if not found:
            raise ValueError(f"{field}: no such file {uri!r}")
    return path_or_uri


def _start(catalog: Catalog, manager: InstanceManager, guard: Guard, name: str, version: str,
           body: PipelineRequest) -> Instance:
    spec = catalog.get(name, version)
    field = "source.uri" if body.source.type == "uri" else "source.device"
    uri = _checked_source(guard, body.source.location, field)
    dest = body.destination.metadata.as_params() if body.destination and body.destination.metadata else None
    instance_id = manager.new_id()
    built = catalog.build(spec, body.parameters, {"metadata": dest} if dest else None, body.tags, instance_id)
    if dest and dest["type"] == "file":
        raw = str(dest["path"])
        path = guard.destination_path(raw)
        if uri.startswith("/") and Path(uri) == path:
            raise ValueError(f"destination.metadata.path {raw!r} is the source being read; write elsewhere")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(exist_ok=True)  # clients open it to follow the results as soon as the instance runs
        except OSError as exc:  # a file in the way of its folder, a name too long, ...
            raise ValueError(f"destination.metadata.path {raw!r}: cannot create it: {exc.strerror or exc}") from None
    request = body.model_dump(mode="json", by_alias=True, exclude_none=True)
    request["source"][("uri" if body.source.type == "uri" else "device")] = redact(body.source.location)
    request["pipeline"] = {"name": name, "version": version}
    return manager.create(name, version, built, [uri], request, instance_id=instance_id)


def _matching(manager: InstanceManager, name: str, version: str, instance_id: str) -> Instance:
    inst = manager.get(instance_id)
    if (inst.name, inst.version) != (name, version):
        raise InstanceNotFound(f"no instance {instance_id!r} of pipeline {name}/{version}")
    return inst
