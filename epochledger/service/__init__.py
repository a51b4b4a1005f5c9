"""The HTTP service, `epochledger serve` (docs/service.md): the ledger's second skin (rule H1).

Like the command line, each route parses its request, makes one facade call (`Ledger`,
epochledger/app.py, with its reports) and encodes the typed result; no rule lives here.
The modules, by what they serve:

- app.py: the ASGI application (Litestar) and the process's one `Ledger` (`Service`);
- problems.py: ledger errors as RFC 9457 problem documents, one table (rule H2);
- auth.py: who may do what (rule H4);
- writes.py, reads.py: the operations (rule H2);
- idempotency.py: safe retries, the Idempotency-Key's kept outcome (rule H3);
- openapi.py: the OpenAPI document, generated into docs/openapi.json (rule H2);
- stream.py: the live stream of the log (rule H5);
- metrics.py: /metrics, /healthz, /readyz (rule H7);
- serve.py: the server process, its bounds and its shutdown (rule H8).

Nothing here is imported by `epochledger` or its command line until `serve` runs (rule W2).
"""
