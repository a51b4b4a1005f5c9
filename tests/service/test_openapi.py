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
