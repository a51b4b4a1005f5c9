"""The served application with a few routes of the tests' own, for the authorization
tests of rule H4 (tests/service/test_service_auth.py), in a real server process:

    python -m tests.helpers.auth_app STORE PORT

It is `epochledger serve`'s application (epochledger.service.app.create_app, served by
epochledger.service.serve.run) with the routes below registered on it. Each is a skin
like the service's own: parse, the guard's checks, one facade call, encode. They stand
in for write routes that act for a slot or an epoch, or hold an operator's act, so the
slot binding and the operator acts are tested over HTTP whatever routes the service has
yet; and one route declares an operation the access table does not know, which every
caller must be refused (deny by default). None is in the OpenAPI document
(`include_in_schema=False`): an operationId is its op, and the stand-ins' ops are the
service's own routes' (rule H2's document is the service's, tested by schemathesis).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import msgspec
from litestar import Request, get, post
from litestar.params import FromPath, FromQuery, JSONBody
from litestar.response import Stream

from epochledger.service import auth
from epochledger.service.app import Service, create_app
from epochledger.service.config import ServiceConfig
from epochledger.service.serve import run
from tests.helpers.server import Served, free_port


class Boot(msgspec.Struct, frozen=True, kw_only=True):
    epoch: str | None = None


class Report(msgspec.Struct, frozen=True, kw_only=True):
    epoch: str


class Resume(msgspec.Struct, frozen=True, kw_only=True):
    by: Literal["operator", "auto"] = "auto"


class Cancel(msgspec.Struct, frozen=True, kw_only=True):
    actor: str | None = None


def _service(request: Request[Any, Any, Any]) -> Service:
    service: Service = request.app.state.service
    return service


@post("/test/slots/{slot:str}/boot", opt={"op": "boot"}, include_in_schema=False, sync_to_thread=True)
def stand_in_boot(request: Request[Any, Any, Any], slot: FromPath[str], data: JSONBody[Boot]) -> dict[str, str]:
    auth.check_slot(request, slot)
    with _service(request).use() as ledger:
        state = ledger.boot(slot, epoch=data.epoch)
    return {"process": state.process, "epoch": state.epoch}


@post("/test/runs/{run:str}/start", opt={"op": "start"}, include_in_schema=False, sync_to_thread=True)
def stand_in_start(request: Request[Any, Any, Any], run: FromPath[str], data: JSONBody[Report]) -> dict[str, str]:
    with _service(request).use() as ledger:
        auth.check_epoch(request, ledger, data.epoch)
        ledger.queue(run)
        state = ledger.start(run, epoch=data.epoch)
    return {"run": state.run, "status": str(state.status)}


@post("/test/runs/{run:str}/finish", opt={"op": "finish"}, include_in_schema=False, sync_to_thread=True)
def stand_in_finish(request: Request[Any, Any, Any], run: FromPath[str], data: JSONBody[Report]) -> dict[str, str]:
    with _service(request).use() as ledger:
        auth.check_epoch(request, ledger, data.epoch)
        state = ledger.finish(run, epoch=data.epoch)
    return {"run": state.run, "status": str(state.status)}


@post("/test/runs/{run:str}/resume", opt={"op": "resume"}, include_in_schema=False, sync_to_thread=True)
def stand_in_resume(request: Request[Any, Any, Any], run: FromPath[str], data: JSONBody[Resume]) -> dict[str, str]:
    auth.check_act(request, "resume", by=data.by)
    with _service(request).use() as ledger:
        state = ledger.resume(run, data.by)
    return {"run": state.run, "status": str(state.status)}


@post("/test/runs/{run:str}/cancel", opt={"op": "cancel"}, include_in_schema=False, sync_to_thread=True)
def stand_in_cancel(request: Request[Any, Any, Any], run: FromPath[str], data: JSONBody[Cancel]) -> dict[str, str]:
    auth.check_act(request, "cancel", actor=data.actor)
    with _service(request).use() as ledger:
        state = ledger.cancel(run, actor=data.actor)
    return {"run": state.run, "status": str(state.status)}


@get("/test/runs/{run:str}", opt={"op": "run_view"}, include_in_schema=False, sync_to_thread=True)
def stand_in_run_view(request: Request[Any, Any, Any], run: FromPath[str]) -> dict[str, str]:
    with _service(request).use() as ledger:
        view = ledger.run_view(run)
    return {"run": view.state.run, "status": str(view.state.status)}


@get("/test/stream", opt={"op": "stream"}, include_in_schema=False, sync_to_thread=False)
def stand_in_stream(request: Request[Any, Any, Any], lines: FromQuery[int] = 1) -> Stream:
    """A line every 20 ms while the caller is still allowed (`lines` of them, at most
    250: 5 s), then the end: a stand-in for the live stream's use of
    `auth.still_allowed`."""

    def body() -> Iterator[bytes]:
        for _ in range(min(lines, 250)):
            if not auth.still_allowed(request):
                yield b"refused\n"
                return
            yield b"ok\n"
            time.sleep(0.02)

    return Stream(body(), media_type="text/plain")


@get("/test/undeclared", opt={"op": "not_in_the_table"}, include_in_schema=False, sync_to_thread=False)
def stand_in_undeclared() -> str:
    return "served"  # never: the guard refuses an operation the table does not know


@get("/test/no-op", include_in_schema=False, sync_to_thread=False)
def stand_in_no_op() -> str:
    return "served"  # never: a route that declares no operation is refused to every caller


EXTRA = [
    stand_in_boot,
    stand_in_start,
    stand_in_finish,
    stand_in_resume,
    stand_in_cancel,
    stand_in_run_view,
    stand_in_stream,
    stand_in_undeclared,
    stand_in_no_op,
]


def app_for(store: str) -> Any:
    config = ServiceConfig(store=store)
    app = create_app(config)
    for handler in EXTRA:
        app.register(handler)
    return app


@contextmanager
def served(store: str, *, host: str = "127.0.0.1", ready_timeout: float = 30) -> Iterator[Served]:
    """This application in a real server process (as tests/helpers/server.py), on loopback
    unless `host` says otherwise; `epochledger serve`'s refusal of a non-loopback
    address without tokens is its command line's, which this launcher skips."""
    import socket
    import subprocess

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.auth_app", store, str(port), host],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    server = Served(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + ready_timeout
    try:
        while True:
            if process.poll() is not None:
                _, errs = process.communicate()
                raise AssertionError(f"the test server exited {process.returncode}: {errs.decode(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the test server did not listen within {ready_timeout}s") from None
                time.sleep(0.05)
        yield server
    finally:
        if process.poll() is None:
            server.stop()
        else:
            process.wait()


if __name__ == "__main__":
    store, port, host = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    config = ServiceConfig(store=store, port=port, host=host)
    run(config, app=app_for(store))
