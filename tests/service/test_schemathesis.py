"""Property-based checks of the whole API against its own OpenAPI schema (schemathesis, default checks)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="needs schemathesis (test extra)")
from hypothesis import HealthCheck, settings  # noqa: E402

from service.cli import serve_app  # noqa: E402

from .conftest import serve_args  # noqa: E402

_WORKDIR = tempfile.TemporaryDirectory(prefix="vapipe-schemathesis-")
APP, MANAGER = serve_app(serve_args(Path(_WORKDIR.name)))
# A request valid by the schema may still name a file that does not exist or a stage parameter
# the pipeline does not have: that is a 400 with the field named, which the API documents.
CONFIG = schemathesis.config.SchemathesisConfig.from_dict({"checks": {"positive_data_acceptance": {
    "expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]}}})
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)


@schemathesis.hook
def filter_path_parameters(ctx, path_parameters) -> bool:  # noqa: ANN001 - schemathesis' hook signature
    """``GET /pipelines/status`` (the list of statuses) is declared before ``GET
    /pipelines/{instance_id}``, as the clients expect: the id ``status`` names that list, not an
    instance (instance ids are 32 hex digits)."""
    return not path_parameters or path_parameters.get("instance_id") != "status"


@pytest.fixture(scope="module", autouse=True)
def _stop_instances():
    yield
    MANAGER.close()


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case) -> None:
    case.call_and_validate()


def test_schema_has_the_routes_clients_use(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    app, manager = serve_app(serve_args(tmp_path))
    try:
        paths = TestClient(app).get("/openapi.json").json()["paths"]
    finally:
        manager.close()
    for path in ("/pipelines", "/pipelines/{name}/{version}", "/pipelines/status", "/pipelines/status/{instance_id}",
                 "/pipelines/{instance_id}", "/pipelines/{instance_id}/status", "/pipelines/{instance_id}/sources",
                 "/pipelines/{instance_id}/sources/{source_id}", "/models", "/metrics", "/healthz"):
        assert path in paths, path
