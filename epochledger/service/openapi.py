"""The service's OpenAPI 3.1 document, as Litestar builds it from the routes' Structs,
written to docs/openapi.json (rule H2: the committed document is the served one; a
test compares the two).

    python -m epochledger.service.openapi --write    # regenerate docs/openapi.json
    python -m epochledger.service.openapi --check    # exit 1 if it differs

Deterministic: keys sorted, two-space indent, one trailing newline; the routes' order is
their order in the route modules.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def document() -> dict[str, Any]:
    """The document the application serves at /openapi/openapi.json, built over a
    throwaway store (the schema depends on the routes, never on a ledger's contents)."""
    from litestar.serialization import encode_json

    from epochledger.app import open_ledger
    from epochledger.service.app import Service, create_app
    from epochledger.service.config import ServiceConfig

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'schema.db'}"
        open_ledger(url, init=True).close()
        config = ServiceConfig(store=url)
        service = Service(config)
        try:
            app = create_app(config, service=service)
            # As Litestar serves it: its encoder turns the Structs an example holds into JSON.
            built: dict[str, Any] = json.loads(encode_json(app.openapi_schema.to_schema()))
        finally:
            service.close()
    return built


def text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m epochledger.service.openapi", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write docs/openapi.json")
    mode.add_argument("--check", action="store_true", help="exit 1 if docs/openapi.json differs")
    ns = parser.parse_args(argv)
    built = text(document())
    if ns.write:
        DOC.write_text(built)
        return 0
    if DOC.exists() and DOC.read_text() == built:
        return 0
    print(
        f"{DOC.name} differs from the served document: run python -m epochledger.service.openapi --write",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
