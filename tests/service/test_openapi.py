"""The committed OpenAPI document is the one the service serves (rule H2)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from epochledger import open_ledger
from epochledger.service import openapi
from tests.helpers.server import served

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_H2_the_committed_openapi_document_is_the_served_one_and_the_generators(sqlite_url: str) -> None:
    committed = DOC.read_text()
    built = openapi.text(openapi.document())
    assert committed == built, "docs/openapi.json is stale: python -m epochledger.service.openapi --write"
    open_ledger(sqlite_url, init=True).close()
    with served(sqlite_url) as base:
        served_doc = httpx.get(f"{base}/openapi/openapi.json", timeout=30).json()
    assert served_doc == json.loads(committed)
    assert served_doc["openapi"].startswith("3.1")
    # Every write route names its body and its answer by the Structs the handlers take.
    batch = served_doc["paths"]["/v1/batch"]["post"]
    assert batch["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/BatchBody"}
    assert "application/problem+json" in batch["responses"]["409"]["content"]


def test_H2_every_route_declares_its_parameters_in_the_style_the_framework_keeps(sqlite_url: str) -> None:
    """A query parameter inferred from a bare annotation, or aliased with the old
    `Parameter(query=...)`, is deprecated in Litestar 2 and goes in its next major
    version, where it would silently become something else (a body, a missing alias).
    Building the app, the console's pages and the document included, warns of none."""
    import warnings

    from epochledger.service.app import create_app
    from epochledger.service.config import ServiceConfig

    open_ledger(sqlite_url, init=True).close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        create_app(ServiceConfig(store=sqlite_url)).openapi_schema  # noqa: B018 - built for its warnings
    deprecated = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert deprecated == []
