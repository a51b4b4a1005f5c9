"""The service attacked from its own OpenAPI document before users do (rule H2):
schemathesis generates requests for every operation of the served document, valid and
invalid, against a real server process, and checks that none is answered with a 5xx and
that every answer matches the document (status, content type, schema). Bounded in time
(--max-time), so the run ends in about two minutes on two cores.

The live stream (/v1/stream) is left out: it answers an endless text/event-stream, which
schemathesis would wait on; tests/service/test_service_live.py attacks it instead (rule H5)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from epochledger import open_ledger
from tests.helpers.server import served

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
BUDGET_S = int(os.environ.get("EPOCHLEDGER_SCHEMATHESIS_SECONDS", "100"))


def _schemathesis() -> str:
    found = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("schemathesis is not installed: it is in the dev extra (`make test` installs it)")
    return found


@pytest.mark.timeout(BUDGET_S + 120)
def test_H2_every_operation_holds_against_generated_requests(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    open_ledger(url, init=True).close()
    with served(url) as base:
        done = subprocess.run(
            [
                _schemathesis(),
                "run",
                f"{base}/openapi/openapi.json",
                "--exclude-path",
                "/v1/stream",
                "--checks",
                CHECKS,
                "--phases",
                "examples,coverage,fuzzing",
                "--max-examples",
                "25",
                "--max-time",
                str(BUDGET_S),
                # One worker: with two, schemathesis's threads build Hypothesis
                # strategies at once, whose lambda descriptions call ast.parse, and
                # CPython 3.11's AST constructor keeps one recursion depth per
                # interpreter: it fails with "SystemError: AST constructor recursion
                # depth mismatch", a crash of the tool's own,
                # counted as an error. The server is a process of its own either way.
                "--workers",
                "1",
                "--seed",
                "20261202",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=BUDGET_S + 90,
            env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
        )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
