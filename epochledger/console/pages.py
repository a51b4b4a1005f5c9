"""The console's pages (rules H9, H10, docs/console.md): HTML over the service's facade.

A skin like the JSON routes (rule H1): each page parses its query, makes the facade
calls the JSON read routes make (it calls those routes' own functions, epochledger/
service/reads.py, so there is one copy of each call), and renders the result. Every
value from the log passes through `esc` (one escaping function) on its way into the
page; nothing is written into an attribute or a tag without it. No inline script or
style: the page links /static/console.css and /static/console.js, served from the
package, and every console response carries CSP (rule H9).

Sessions (rule H10): `POST /login` with a token sets the session cookie
(auth.SESSION_COOKIE), which the guard reads as it reads a bearer token
(auth.credentials). A form that acts (an operator's correct, cancel, resume) carries
the CSRF token of the double-submit cookie (CSRF_COOKIE), checked before the one facade
call, and comes from a confirmation page.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from importlib import resources
from typing import Annotated, Any, cast
from urllib.parse import quote, urlencode

import msgspec
from litestar import Request, Response, Router, get, post
from litestar.datastructures import Cookie, ResponseHeader
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, FromQuery, QueryParameter

from epochledger import reports as facade
from epochledger.ledger import access
from epochledger.ledger.codec import instant
from epochledger.ledger.errors import InvalidInput
from epochledger.ledger.events import Status
from epochledger.replay import timeline
from epochledger.replay.whatif import BUILTIN
from epochledger.reports import (
    AuditTable,
    EpochLiveness,
    ErrorClassHealth,
    Fleet,
    HistoryEntry,
    RunPage,
    RunView,
    WhatIf,
)
from epochledger.service import auth, problems, reads
from epochledger.service.problems import AccessRefused

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
)
CSRF_COOKIE = "epochledger_csrf"
SESSION_MAX_AGE = 12 * 3600  # seconds a session cookie lives (docs/console.md)
STATIC_CACHE = "public, max-age=31536000, immutable"  # the URLs carry their content's hash

Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]
Req = Request[Any, Any, Any]


def esc(value: object) -> str:
    """The one escaping function of the console: text and attribute values alike."""
    return html.escape("" if value is None else str(value), quote=True)


# ------------------------------------------------------------------ static files
def _static() -> dict[str, tuple[bytes, str]]:
    files = resources.files("epochledger.console") / "static"
    found = {
        "console.css": (files.joinpath("console.css").read_bytes(), "text/css; charset=utf-8"),
        "console.js": (files.joinpath("console.js").read_bytes(), "text/javascript; charset=utf-8"),
        "incident.js": (files.joinpath("incident.js").read_bytes(), "text/javascript; charset=utf-8"),
        "timeline.css": (timeline.STYLE.encode(), "text/css; charset=utf-8"),
        "timeline.js": (timeline.SCRIPT.encode(), "text/javascript; charset=utf-8"),
    }
    return found


STATIC = _static()
VERSION = hashlib.sha256(b"".join(body for body, _ in STATIC.values())).hexdigest()[:16]
ASSETS = f"/static/{VERSION}/"  # a new release's files have new URLs: cached for a year


@get("/static/{version:str}/{name:str}", opt={"op": "console_static"}, include_in_schema=False)
async def static(version: FromPath[str], name: FromPath[str]) -> Response[bytes]:
    """The console's style sheet and script, and the incident page's (public: the
    package's own files)."""
    found = STATIC.get(name)
    if found is None or version != VERSION:
        raise InvalidInput(f"no such console file: {name!r} of version {version!r}", where="path")
    body, media = found
    return Response(body, media_type=media, headers={"Cache-Control": STATIC_CACHE})


# ------------------------------------------------------------------- rendering
def _cell(value: object) -> str:
    return f"<td>{esc(value)}</td>"


def table(head: Iterable[str], rows: Iterable[Iterable[str]], *, empty: str = "none") -> str:
    """A table of already-escaped cells (`_cell`, `link`)."""
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    return f"<table><thead><tr>{_heads(head)}</tr></thead><tbody>{body}</tbody></table>"


def _heads(head: Iterable[str]) -> str:
    return "".join(f'<th scope="col">{esc(h)}</th>' for h in head)


def isolate(text: str) -> str:
    """`text` between FIRST STRONG ISOLATE and POP DIRECTIONAL ISOLATE (U+2068, U+2069):
    in a page's title, where no element (<bdi>) may go, a run id's bidirectional
    overrides cannot reorder the words around it."""
    return f"\u2068{text}\u2069"


def run_link(run: str) -> str:
    return f'<a class="id" href="/runs/{esc(quote(run, safe=""))}">{esc(run)}</a>'


def _when(t: datetime | None) -> str:
    return "" if t is None else t.isoformat().replace("+00:00", "Z")


NAV = (
    ("/", "Fleet"),
    ("/runs", "Runs"),
    ("/epochs", "Slots and epochs"),
    ("/incident", "Incident"),
    ("/whatif", "What-if"),
    ("/audit", "Audit"),
)
NAV_OPS = {"/audit": "audit_report"}  # a link shown only to a role that may open it


def page(request: Req, title: str, body: str, *, current: str) -> Response[str]:
    """A whole console page: the navigation, who is logged in, `body` (escaped HTML)."""
    who = auth.caller(request)
    nav = "".join(
        f'<a href="{href}"{" aria-current=page" if href == current else ""}>{esc(text)}</a>'
        for href, text in NAV
        if href not in NAV_OPS or access.allows(who.role, NAV_OPS[href])
    )
    name = who.name or who.token or "loopback"
    logout = ""
    if who.token is not None:
        logout = (
            f'<form method="post" action="/logout"><input type="hidden" name="csrf" value="{esc(csrf_of(request))}">'
            '<button type="submit">Log out</button></form>'
        )
    text = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} - epochledger</title>"
        f'<link rel="stylesheet" href="{ASSETS}console.css"><script src="{ASSETS}console.js" defer></script>'
        f'</head><body><header><nav aria-label="console">{nav}</nav><span id="live-state" role="status"></span>'
        f'<span class="who">{esc(name)} ({esc(who.role)})</span>{logout}</header>'
        f"<main><h1>{esc(title)}</h1>{body}</main></body></html>\n"
    )
    return _html(request, text)


def _html(request: Req, text: str, status: int = 200) -> Response[str]:
    response = Response(text, status_code=status, media_type="text/html")
    if CSRF_COOKIE not in request.cookies:
        response.set_cookie(_csrf_cookie(request, _new_csrf(request)))
    return response


# ---------------------------------------------------------------------- CSRF
def _secure(request: Req) -> bool:
    """Served over https, directly or behind a proxy that says so (X-Forwarded-Proto)."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def _new_csrf(request: Req) -> str:
    token = request.state.get("epochledger_csrf")
    if not isinstance(token, str):
        token = request.state["epochledger_csrf"] = secrets.token_urlsafe(32)
    return token


def csrf_of(request: Req) -> str:
    """The CSRF token a form of this page carries: the cookie's, or the one this
    response sets."""
    return request.cookies.get(CSRF_COOKIE) or _new_csrf(request)


def _csrf_cookie(request: Req, value: str) -> Cookie:
    return Cookie(key=CSRF_COOKIE, value=value, path="/", httponly=True, samesite="strict", secure=_secure(request))


def check_csrf(request: Req, form: Mapping[str, str]) -> None:
    """Refuse (403) a form post whose CSRF token is not its cookie's (double submit).
    A request with an Authorization header is not a browser's form (a form cannot set
    it): it needs none."""
    if request.headers.get("authorization"):
        return
    cookie = request.cookies.get(CSRF_COOKIE, "")
    given = form.get("csrf", "")
    if not cookie or not hmac.compare_digest(cookie.encode(), given.encode()):
        raise AccessRefused(
            403,
            "the form's CSRF token is missing or stale: reload the page and submit it again",
            kind=AccessRefused.CSRF,
        )


# ------------------------------------------------------------------ the pages
@get("/", opt={"op": "fleet"}, sync_to_thread=True, include_in_schema=False)
def fleet(request: Req) -> Response[str]:
    """Fleet now: runs by status, running runs by slot, orphans with rule and evidence,
    streaking runs, dead-letters, sweeps that gave up, each view's lag, the last verify."""
    service: Any = request.app.state.service
    with service.use() as ledger:
        now = ledger.fleet()
    verified = request.app.state.metrics.verified
    parts = []
    for e in now.sweep_failed:
        parts.append(
            f'<p class="banner" role="alert">The sweep of epoch <span class="id">{esc(e.epoch)}</span> (slot '
            f'<span class="id">{esc(e.process)}</span>) gave up at {esc(_when(e.sweep_failed_at))} (rule O5).</p>'
        )
    statuses = [
        [f'<td><a href="/runs?{esc(urlencode({"status": s}))}">{esc(s)}</a></td>', _cell(n)]
        for s, n in now.by_status.items()
    ]
    parts.append("<h2>Runs by status</h2>" + table(["status", "runs"], statuses, empty="no runs"))
    slots = [
        [
            _cell(slot),
            f'<td><a href="/runs?{esc(urlencode({"predicate": facade.RUNNING_PREDICATE, "process": slot}))}">{esc(n)}</a></td>',
        ]
        if slot
        else [_cell("(no slot)"), _cell(n)]
        for slot, n in now.running_by_slot.items()
    ]
    parts.append("<h2>Running runs by slot</h2>" + table(["slot", "running runs"], slots, empty="no run is running"))
    orphans = [[f"<td>{run_link(o.state.run)}</td>", _cell(o.rule), _cell(o.why)] for o in now.orphans]
    parts.append("<h2>Orphans</h2>" + table(["run", "rule", "evidence"], orphans, empty="no orphan"))
    streaks = [
        [
            f"<td>{run_link(s.state.run)}</td>",
            _cell(s.streak.failures),
            _cell(_age(s.streak.age_s)),
            _cell(s.streak.error_class),
        ]
        for s in now.streaking
    ]
    parts.append(
        "<h2>Streaking runs</h2>"
        + table(["run", "failures", "streak age", "error class"], streaks, empty="no open streak")
    )
    health = now.tick_health
    dead = [[_cell(step), _cell(n)] for step, n in sorted(health.dead_letters_by_step.items())]
    parts.append(
        f"<h2>Dead-letters: {esc(health.dead_letters)}</h2>" + table(["step", "dead-letters"], dead, empty="none")
    )
    classes = [[f"<td>{error_class_link(c)}</td>", _cell(s), _cell(d)] for c, s, d in _by_error_class(now)]
    parts.append(
        '<h2 id="by-error-class">Tick health by error class</h2>'
        + table(["error class", "open streaks", "dead-letters"], classes, empty="no open streak, no dead-letter")
    )
    lags = [[_cell(v.view), _cell(v.position), _cell(v.lag)] for v in now.lags]
    parts.append(f"<h2>Views (log head {esc(now.head)})</h2>" + table(["view", "position", "lag"], lags))
    if verified is None:
        parts.append('<p class="muted">The chain was not verified by this server yet (epochledger verify).</p>')
    else:
        ok, when = verified
        stamp = datetime.fromtimestamp(when).astimezone().isoformat(timespec="seconds")
        parts.append(f"<p>Last verify by this server: {'passed' if ok else 'FAILED'} at {esc(stamp)}.</p>")
    body = f'<div id="fleet" data-live>{"".join(parts)}</div>'
    return page(request, "Fleet now", body, current="/")


def _by_error_class(now: Fleet) -> list[tuple[str, int, int]]:
    """(error class, open streaks, dead-letters), by class name: the open streaks are
    those of the streaking runs the page lists (a deleted run's left out, as there), the
    dead-letters the tick-health view's own count by class. Each class links to its page
    (`error_class_page`), which lists the runs these count."""
    streaks = Counter(s.streak.error_class for s in now.streaking)
    dead = now.tick_health.dead_letters_by_error_class
    return [(c, streaks.get(c, 0), dead.get(c, 0)) for c in sorted(streaks.keys() | dead.keys())]


def error_class_link(error_class: str) -> str:
    return f'<a class="id" href="/tick-health?{esc(urlencode({"error_class": error_class}))}">{esc(error_class)}</a>'


@get("/tick-health", opt={"op": "error_class_health"}, sync_to_thread=True, include_in_schema=False)
def error_class_page(request: Req, error_class: FromQuery[str]) -> Response[str]:
    """One error class's tick health (the fleet's row of the class, run by run): the
    runs whose open streak is of this class, and its dead-letters (docs/tick.md)."""
    found = cast("ErrorClassHealth", reads.error_class_health.fn(request.app.state, name=error_class))
    streaks = [
        [
            f"<td>{run_link(s.state.run)}</td>",
            _cell(s.streak.failures),
            _cell(_age(s.streak.age_s)),
            _cell(_when(s.streak.since)),
            _cell(s.streak.step),
            _cell(s.streak.error),
        ]
        for s in found.streaking
    ]
    dead = [
        [
            f"<td>{run_link(d.run)}</td>",
            _cell(_when(d.at)),
            _cell(d.step),
            _cell(d.failures),
            _cell(_when(d.failing_since)),
            _cell(f"{d.deadline_s:g} s"),
            _cell(d.error),
        ]
        for d in found.dead_letters
    ]
    body = (
        f'<div id="error-class" data-live><h2>Open streaks: {esc(len(streaks))}</h2>'
        + table(["run", "failures", "streak age", "failing since", "step", "error"], streaks, empty="no open streak")
        + f"<h2>Dead-letters: {esc(len(dead))}</h2>"
        + table(["run", "dead-lettered", "step", "failures", "failing since", "deadline", "error"], dead, empty="none")
        + '</div><p><a href="/#by-error-class">Back to tick health by error class</a></p>'
    )
    return page(request, f"Error class {isolate(error_class)}", body, current="/")


def _age(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return ""
    s = int(seconds)
    return f"{s // 3600}h {s % 3600 // 60}m {s % 60}s" if s >= 3600 else f"{s // 60}m {s % 60}s"


def _given(values: list[str] | None) -> list[str]:
    return [v for v in values or () if v.strip()]


RUN_FILTERS = ("status", "predicate", "code", "label", "process", "parent")


@get("/runs", opt={"op": "list_runs"}, sync_to_thread=True, include_in_schema=False)
def runs(
    request: Req,
    status: FromQuery[list[str] | None] = None,
    predicate: FromQuery[list[str] | None] = None,
    code: FromQuery[list[str] | None] = None,
    label: FromQuery[list[str] | None] = None,
    process: FromQuery[list[str] | None] = None,
    parent: FromQuery[list[str] | None] = None,
    after: FromQuery[str | None] = None,
    limit: FromQuery[int] = reads.PAGE_DEFAULT,
) -> Response[str]:
    """Runs: the CLI's filters as a GET form, one page by the facade's cursor."""
    chosen: dict[str, list[str]] = {
        "status": _given(status),
        "predicate": _given(predicate),
        "code": _given(code),
        "label": _given(label),
        "process": _given(process),
        "parent": _given(parent),
    }
    known = {str(s) for s in Status}
    for s in chosen["status"]:
        if s not in known:
            raise InvalidInput(f"unknown status {s!r} (known: {', '.join(sorted(known))})", where="status")
    if not 1 <= limit <= reads.PAGE_MAX:
        raise InvalidInput(f"limit must be from 1 to {reads.PAGE_MAX}, got {limit}", where="limit")
    found = cast(
        "RunPage",
        reads.list_runs.fn(
            request.app.state,
            status=[Status(s) for s in chosen["status"]] or None,
            predicate=chosen["predicate"] or None,
            code=chosen["code"] or None,
            label=chosen["label"] or None,
            process=chosen["process"] or None,
            parent=chosen["parent"] or None,
            after=after or None,
            limit=limit,
        ),
    )
    options = "".join(
        f'<option value="{esc(s)}"{" selected" if s in chosen["status"] else ""}>{esc(s)}</option>'
        for s in ("", *Status)
    )
    fields = [f'<label>status<select name="status">{options}</select></label>']
    for name in RUN_FILTERS[1:]:
        value = chosen[name][0] if chosen[name] else ""
        hint = "KEY=VALUE" if name == "label" else ""
        fields.append(f'<label>{esc(name)}<input name="{name}" value="{esc(value)}" placeholder="{hint}"></label>')
    form = f'<form class="filters" method="get" action="/runs">{"".join(fields)}<button type="submit">Filter</button></form>'
    rows = [
        [
            f"<td>{run_link(r.run)}</td>",
            _cell(r.status),
            _cell(r.code_shown),
            _cell(r.process),
            _cell(" ".join(f"{k}={v}" for k, v in sorted(r.labels.items()))),
            _cell(r.parent),
            _cell(_when(r.updated_at)),
        ]
        for r in cast("list[Any]", found.runs)
    ]
    listing = table(["run", "status", "code", "slot", "labels", "parent", "updated"], rows, empty="no run matches")
    more = ""
    if found.next is not None:
        query = [(k, v) for k, vs in chosen.items() for v in vs] + [("after", found.next), ("limit", str(limit))]
        more = f'<p><a rel="next" href="/runs?{esc(urlencode(query))}">Next page</a></p>'
    lag = f'<p class="muted">runs view lag: {esc(found.lag)} positions</p>'
    return page(request, "Runs", form + f'<div id="runs" data-live>{listing}{more}{lag}</div>', current="/runs")


def _row_class(entry: HistoryEntry) -> str:
    if entry.label.startswith("CORRECTION"):
        return ' class="correction"'
    if entry.label.startswith("FENCED"):
        return ' class="fenced"'
    if entry.poison is not None:
        return ' class="undecodable"'
    return ""


def _history(entries: list[HistoryEntry]) -> str:
    rows = []
    for e in entries:
        d: dict[str, Any] = msgspec.to_builtins(e.event) if e.event is not None else {}
        rows.append(
            f"<tr{_row_class(e)}>{_cell(e.position)}{_cell(d.get('at', ''))}{_cell(e.label)}{_cell(e.from_status)}"
            f"{_cell(d.get('status', ''))}{_cell(d.get('actor'))}{_cell(d.get('reason'))}{_cell(d.get('code'))}"
            f"{_cell(d.get('epoch'))}</tr>"
        )
    head = ["position", "at", "event", "from", "to", "actor", "reason", "code", "epoch"]
    return f"<table><thead><tr>{_heads(head)}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _facts(view: RunView) -> str:
    s = view.state
    facts = [
        ("status", s.status),
        ("code", view.code_shown),
        ("workflow", s.workflow),
        ("slot", s.process),
        ("epoch", s.epoch),
        ("attempt", s.attempt),
        ("checkpoint", None if s.checkpoint is None else s.checkpoint.ref),
        ("last actor", s.actor),
        ("last reason", s.reason),
        ("corrections", s.corrections),
        ("fenced reports", s.fenced),
        ("labels", " ".join(f"{k}={v}" for k, v in sorted(s.labels.items()))),
    ]
    rows = "".join(f'<tr><th scope="row">{esc(k)}</th>{_cell(v)}</tr>' for k, v in facts)
    parent = run_link(s.parent) if s.parent else "none"
    children = " ".join(run_link(c) for c in view.children) or "none"
    rows += f'<tr><th scope="row">parent</th><td>{parent}</td></tr><tr><th scope="row">children</th><td>{children}</td></tr>'
    health = view.tick_health
    streak = "none" if health.streak is None else f"{health.streak.failures} failures, {_age(health.streak.age_s)}"
    rows += f'<tr><th scope="row">tick streak</th>{_cell(streak)}</tr>'
    rows += f'<tr><th scope="row">dead-letters</th>{_cell(len(health.dead_letters))}</tr>'
    predicates = "".join(
        f'<tr><th scope="row">{esc(p)}</th><td class="{"yes" if v else "no"}">{"yes" if v else "no"}</td></tr>'
        for p, v in sorted(view.predicates.items())
    )
    return (
        f"<table><tbody>{rows}</tbody></table><h2>Lifecycle predicates</h2><table><tbody>{predicates}</tbody></table>"
    )


# The operator's acts on a run, each the op of the role table (ledger/access.py) it makes.
ACTS = {"correct": "correct", "cancel": "cancel.operator", "resume": "resume.operator"}


def _acts_form(request: Req, run: str) -> str:
    who = auth.caller(request)
    allowed = [a for a, op in ACTS.items() if access.allows(who.role, op)]
    if not allowed:
        return ""
    acts = "".join(f'<option value="{a}">{a}</option>' for a in allowed)
    statuses = "".join(f'<option value="{s}">{s}</option>' for s in Status)
    return (
        f'<h2>Operator acts</h2><form class="filters" method="post" action="/runs/{esc(quote(run, safe=""))}/confirm">'
        f'<input type="hidden" name="csrf" value="{esc(csrf_of(request))}">'
        f'<label>act<select name="act">{acts}</select></label>'
        f'<label>correct to<select name="to">{statuses}</select></label>'
        '<label>code (correct)<input name="code"></label>'
        '<label>reason<input name="reason" required></label>'
        '<button type="submit">Review</button></form>'
    )


@get("/runs/{run:str}", opt={"op": "run_view"}, sync_to_thread=True, include_in_schema=False)
def run_page(request: Req, run: FromPath[str]) -> Response[str]:
    """A run: its facts, every lifecycle predicate, its history (corrections and fenced
    reports stand out), and, for an operator, the acts it may make."""
    view = cast("RunView", reads.run_view.fn(request.app.state, run=run))
    history = cast("list[HistoryEntry]", reads.history_of.fn(request.app.state, run=run))
    body = f'<div id="run" data-live>{_facts(view)}<h2>History</h2>{_history(history)}</div>{_acts_form(request, run)}'
    return page(request, f"Run {isolate(run)}", body, current="/runs")


@get("/epochs", opt={"op": "epoch_liveness"}, sync_to_thread=True, include_in_schema=False)
def epochs(request: Req, retired: FromQuery[bool] = False) -> Response[str]:
    """Slots and epochs: each slot's epochs with their liveness facts (rule O7)."""
    found = cast(
        "list[EpochLiveness]", reads.epoch_liveness.fn(request.app.state, process=None, live=False, retired=retired)
    )
    by_slot: dict[str, list[str]] = {}
    for x in found:
        e = x.epoch
        exited = "" if e.exited_at is None else f"{_when(e.exited_at)} by {e.exited_by}: {e.exit_evidence or ''}"
        by_slot.setdefault(e.process, []).append(
            f"<tr>{_cell(e.epoch)}{_cell(_when(e.booted_at))}{_cell(e.host)}{_cell(e.pid)}"
            f"{_cell('live' if x.live else x.ended)}{_cell(x.why)}{_cell(e.superseded_by)}{_cell(_when(e.stopped_at))}"
            f"{_cell(exited)}{_cell(e.sweep_skipped)}</tr>"
        )
    head = [
        "epoch",
        "booted",
        "host",
        "pid",
        "liveness",
        "evidence",
        "superseded by",
        "stopped",
        "exited",
        "sweep skipped",
    ]
    th = _heads(head)
    parts = [
        f'<h2>Slot <span class="id">{esc(slot)}</span></h2><table><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        for slot, rows in by_slot.items()
    ]
    body = f'<div id="epochs" data-live>{"".join(parts) or "<p>no epoch</p>"}</div>'
    return page(request, "Slots and epochs", body, current="/epochs")


@get("/incident", opt={"op": "timeline"}, sync_to_thread=True, include_in_schema=False)
def incident(
    request: Req,
    start: Annotated[str | None, QueryParameter(name="from")] = None,
    end: Annotated[str | None, QueryParameter(name="to")] = None,
    at: FromQuery[str | None] = None,
    run: FromQuery[list[str] | None] = None,
    policy: FromQuery[str | None] = None,
    upto: FromQuery[str | None] = None,
) -> Response[str]:
    """The incident picture (rule V1) of `timeline -o`, for an interval: `from`, `to`
    and the cursor `at`, RFC 3339; `run` (repeatable): only those runs; `policy`
    (NAME[:ARG]) and `upto` (RFC 3339): the what-if page's, each verdict it gives
    differently flagged on its run (its result, the what-if page's own call). Its style
    and scripts are linked, never inline. Without JavaScript it is the picture, the GET
    form and, with a cursor, the panel of what happened around it; with it, the
    picture zooms, pans, brushes and places its cursor (incident.js: each a new URL of
    this page, the what-if's kept) and follows the live stream (console.js swaps
    `#picture` in anew)."""
    lo, hi, cursor = instant(start or None, "from"), instant(end or None, "to"), instant(at or None, "at")
    instant(upto or None, "upto")  # refused by its own name before the what-if reads it as its `at`
    chosen = _given(run)
    alternative = (policy or "").strip()
    found = (
        cast("WhatIf", reads.whatif.fn(request.app.state, policy=alternative, at=upto or None)) if alternative else None
    )
    fields = "".join(
        f'<label>{label} <input name="{name}" value="{esc(value)}" placeholder="{hint}"></label> '
        for label, name, value, hint in (
            ("from", "from", start, "2026-09-09T14:20:00Z"),
            ("to", "to", end, "2026-09-09T14:20:00Z"),
            ("cursor at", "at", at, "2026-09-09T14:20:00Z"),
            ("what-if policy", "policy", alternative, "flat-age:30m"),
        )
    )
    keep = "".join(f'<input type="hidden" name="run" value="{esc(r)}">' for r in chosen)
    if upto:
        keep += f'<input type="hidden" name="upto" value="{esc(upto)}">'
    header = (
        '<nav aria-label="console"><a href="/">Fleet</a> | <a href="/runs">Runs</a> | '
        '<a href="/epochs">Slots and epochs</a></nav> <span id="live-state" role="status"></span>'
        f'<form class="window" method="get" action="/incident">{fields}{keep}<button type="submit">Show</button></form>'
        f'<script src="{ASSETS}console.js" defer></script><script src="{ASSETS}incident.js" defer></script>'
    )
    service: Any = request.app.state.service
    with service.use() as ledger:
        text = ledger.timeline_page(
            start=lo,
            end=hi,
            cursor=cursor,
            runs=chosen or None,
            assets=ASSETS,
            header=f"<header>{header}</header>",
            live=True,
            whatif=found,
            fold_link=_runs_of,
        )
    return _html(request, text)


def _runs_of(slot: str, status: Status) -> str | None:
    """The runs page of a slot's runs of a status (a density band's link, rule V1); none
    for the lane of runs that name no slot, which the runs filters cannot choose."""
    if slot == timeline.NO_SLOT:
        return None
    return "/runs?" + urlencode({"process": slot, "status": status})


# What a difference says, in the columns of the what-if table (rule R4's evidence).
WHATIF_HEAD = ("kind", "run", "sweep", "judged at", "owner", "owner live", "age", "verdict", "then", "evidence")


def _seconds(value: float | None) -> str:
    return "" if value is None else _age(value)


def _difference(d: Any, picture: Mapping[str, str]) -> list[str]:
    sweep = f"{d.sweep_process} / {d.sweep_epoch} @ {d.position}"
    owner = "" if d.owner_process is None else f"{d.owner_process} / {d.owner_epoch or ''}"
    live = "" if d.owner_live is None else ("yes" if d.owner_live else "no")
    verdict = []
    if d.alternative is not None:
        verdict.append(f"alternative: {d.alternative.rule}")
    if d.recorded_rule is not None:
        verdict.append(f"recorded: {d.recorded_rule}")
    then = d.then or ""
    if d.running_for_s is not None:
        until = f" until {_when(d.until)} ({d.until_why})" if d.until is not None else ""
        then = f"running {_seconds(d.running_for_s)} longer{until}"
    if d.found_at is not None:
        then += f"; recovered at {_when(d.found_at)} by {d.found_by or ''}"
    link = urlencode({"at": _when(d.at), "run": d.run, **picture})
    return [
        _cell(d.kind),
        f'<td>{run_link(d.run)} <a href="/incident?{esc(link)}">on the timeline</a></td>',
        _cell(sweep),
        _cell(_when(d.at)),
        _cell(owner),
        _cell(live),
        _cell(_seconds(d.age_s)),
        _cell("; ".join(verdict)),
        _cell(then),
        _cell(d.message),
    ]


@get("/whatif", opt={"op": "whatif"}, sync_to_thread=True, include_in_schema=False)
def whatif(request: Req, policy: FromQuery[str | None] = None, at: FromQuery[str | None] = None) -> Response[str]:
    """What-if (rule R4): a policy NAME[:ARG] and an instant as a GET form; every verdict
    that differs from the recorded sweeps', with its evidence, each run linked to its
    page and to the incident picture at the sweep. `/v1/whatif`'s own call."""
    names = "".join(f'<option value="{esc(n)}"></option>' for n in sorted(BUILTIN))
    form = (
        '<form class="filters" method="get" action="/whatif">'
        f'<label>policy<input name="policy" list="policies" value="{esc(policy)}" placeholder="flat-age:30m" '
        f'required></label><datalist id="policies">{names}</datalist>'
        f'<label>up to<input name="at" value="{esc(at)}" placeholder="2026-09-09T14:20:00Z"></label>'
        '<button type="submit">Replay</button></form>'
        '<p class="muted">Policies: epoch (the recorded rule), flat-age:D, floor:D, clamp, heartbeat:D, or one '
        "installed as a plug-in; the instant is RFC 3339 (empty: the whole log).</p>"
    )
    chosen = (policy or "").strip()
    if not chosen:
        return page(request, "What-if", form, current="/whatif")
    found = cast("WhatIf", reads.whatif.fn(request.app.state, policy=chosen, at=at or None))
    summary = (
        f'<p id="whatif-summary">Policy <strong>{esc(found.policy)}</strong> over {esc(found.sweeps)} sweeps, '
        f"up to log position {esc(found.position)} ({esc(_when(found.at))}): "
        f"{esc(len(found.differences))} verdicts differ.</p>"
    )
    # The incident picture replays the same what-if (policy, and instant if any) to flag its verdicts.
    picture = {"policy": chosen, **({"upto": at} if at else {})}
    rows = [_difference(d, picture) for d in found.differences]
    listing = table(WHATIF_HEAD, rows, empty="no verdict differs from the recorded sweeps'")
    return page(request, f"What-if: {chosen}", form + summary + listing, current="/whatif")


def _audit_table(found: AuditTable) -> str:
    rows = [[_cell(v) for v in row] for row in found.rows]
    return table(found.columns, rows, empty="no rows") + f'<p class="muted">{esc(len(found.rows))} rows</p>'


def _options(values: Iterable[str], chosen: str | None) -> str:
    return "".join(f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v)}</option>' for v in values)


def _sql_form(sql: str | None) -> str:
    return (
        '<h2>Read-only SQL</h2><form method="get" action="/audit/query">'
        f'<label>one SELECT (WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)<textarea name="sql" rows="4" cols="80" '
        f'required>{esc(sql)}</textarea></label> <button type="submit">Run</button></form>'
        '<p class="muted">Bounded in time and memory as <code>epochledger audit query</code> is (docs/audit.md, '
        "Bounds); a statement that writes is refused.</p>"
    )


@get("/audit", opt={"op": "audit_report"}, sync_to_thread=True, include_in_schema=False)
def audit_page(
    request: Req,
    report: FromQuery[str | None] = None,
    as_of: FromQuery[str | None] = None,
    period: FromQuery[str] = "day",
) -> Response[str]:
    """Audit (rule A1): a canned report over the audit file, chosen by a GET form
    (`/v1/audit/reports/{name}`'s own call), and for a role that may query it, the
    read-only SQL form (`/audit/query`)."""
    chosen = report or None
    form = (
        '<form class="filters" method="get" action="/audit">'
        f'<label>report<select name="report">{_options(["", *facade.audit_report_names()], chosen)}</select></label>'
        f'<label>as of<input name="as_of" value="{esc(as_of)}" placeholder="2026-09-10T00:00:00Z"></label>'
        f'<label>period<select name="period">{_options(facade.audit_periods(), period)}</select></label>'
        '<button type="submit">Report</button></form>'
        '<p class="muted">Over the audit file (<code>epochledger audit sync</code> fills it); as of empty: its '
        "newest event.</p>"
    )
    body = form
    if chosen is not None:
        found = cast(
            "AuditTable",
            reads.audit_report.fn(
                request.app.state,
                name=chosen,
                as_of=as_of or None,
                period=period,
                label=None,
                timeout=None,
                memory_limit=None,
            ),
        )
        body += f"<h2>{esc(chosen)}</h2>" + _audit_table(found)
    if access.allows(auth.caller(request).role, "audit_query"):
        body += _sql_form(None)
    return page(request, "Audit", body, current="/audit")


@get("/audit/query", opt={"op": "audit_query"}, sync_to_thread=True, include_in_schema=False)
def audit_sql(request: Req, sql: FromQuery[str]) -> Response[str]:
    """Read-only audit SQL (the auditor's and admin's; `/v1/audit/query`'s own call,
    with its default bounds): the result as a table, every value escaped."""
    found = cast("AuditTable", reads.audit_query.fn(request.app.state, sql=sql, timeout=None, memory_limit=None))
    body = _sql_form(sql) + "<h2>Result</h2>" + _audit_table(found)
    return page(request, "Audit SQL", body, current="/audit")


# --------------------------------------------------------------- the acts
@post("/runs/{run:str}/confirm", opt={"op": "run_view"}, sync_to_thread=True, status_code=200, include_in_schema=False)
def confirm(request: Req, run: FromPath[str], data: Form) -> Response[str]:
    """The confirmation step of an operator's act: what will be written, and a button
    that posts it. Writes nothing."""
    check_csrf(request, data)
    act = data.get("act", "")
    if act not in ACTS:
        raise InvalidInput(f"unknown act {act!r} (known: {', '.join(ACTS)})", where="act")
    auth.require(request, ACTS[act])
    reason = data.get("reason", "")
    what = f"correct run {run} to {data.get('to', '')}" if act == "correct" else f"{act} run {run}"
    keep = {"csrf": csrf_of(request), "reason": reason, "to": data.get("to", ""), "code": data.get("code", "")}
    hidden = "".join(f'<input type="hidden" name="{k}" value="{esc(v)}">' for k, v in keep.items())
    body = (
        f"<p>You are about to <strong>{esc(what)}</strong>, reason: {esc(reason)}. This is recorded in the log "
        "and cannot be undone (only corrected).</p>"
        f'<form method="post" action="/runs/{esc(quote(run, safe=""))}/{act}">{hidden}'
        f'<button class="danger" type="submit">Confirm: {esc(act)}</button></form>'
        f"<p>{run_link(run)} (cancel: go back to the run)</p>"
    )
    return page(request, f"Confirm: {act} {isolate(run)}", body, current="/runs")


def _operator(request: Req) -> str:
    """The actor an operator's act names: `operator:<token name or id>`, or `operator`
    for a loopback caller of a ledger without tokens."""
    who = auth.caller(request)
    name = who.name or who.token
    return access.OPERATOR_ACTOR if name is None else f"{access.OPERATOR_ACTOR}:{name}"


def _done(run: str) -> Response[str]:
    return Response("", status_code=303, headers={"Location": f"/runs/{quote(run, safe='')}"})


@post("/runs/{run:str}/correct", opt={"op": "correct"}, sync_to_thread=True, include_in_schema=False)
def act_correct(request: Req, run: FromPath[str], data: Form) -> Response[str]:
    """Correct a final run's verdict (rule C1), from the confirmation page."""
    check_csrf(request, data)
    to = data.get("to", "")
    if to not in {str(s) for s in Status}:
        raise InvalidInput(f"unknown status {to!r}", where="to")
    service: Any = request.app.state.service
    with service.use() as ledger:
        ledger.correct(
            run, Status(to), actor=_operator(request), reason=data.get("reason", ""), code=data.get("code", "")
        )
    return _done(run)


@post("/runs/{run:str}/cancel", opt={"op": "cancel.operator"}, sync_to_thread=True, include_in_schema=False)
def act_cancel(request: Req, run: FromPath[str], data: Form) -> Response[str]:
    """Cancel a run as an operator, from the confirmation page."""
    check_csrf(request, data)
    actor = _operator(request)
    auth.check_act(request, "cancel", actor=actor)
    service: Any = request.app.state.service
    with service.use() as ledger:
        ledger.cancel(run, actor=actor, reason=data.get("reason") or None)
    return _done(run)


@post("/runs/{run:str}/resume", opt={"op": "resume.operator"}, sync_to_thread=True, include_in_schema=False)
def act_resume(request: Req, run: FromPath[str], data: Form) -> Response[str]:
    """Resume a run as an operator (rule P1), from the confirmation page."""
    check_csrf(request, data)
    auth.check_act(request, "resume", by="operator")
    service: Any = request.app.state.service
    with service.use() as ledger:
        ledger.resume(run, "operator", actor=_operator(request), reason=data.get("reason") or None)
    return _done(run)


# ------------------------------------------------------------------ sessions
def _login_form(request: Req) -> str:
    """The login form, with the CSRF token of this browser's cookie (login CSRF: a form
    on another site cannot log the browser in to the attacker's session)."""
    return (
        f'<form method="post" action="/login"><input type="hidden" name="csrf" value="{esc(csrf_of(request))}">'
        '<label>token<input name="token" type="password" autocomplete="off" required>'
        '</label> <button type="submit">Log in</button></form>'
    )


def _bare(request: Req, title: str, body: str, status: int = 200) -> Response[str]:
    text = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>{esc(title)} - epochledger</title><link rel="stylesheet" href="{ASSETS}console.css"></head>'
        f"<body><main><h1>{esc(title)}</h1>{body}</main></body></html>\n"
    )
    return _html(request, text, status)


@get("/login", opt={"op": "console_login"}, include_in_schema=False)
async def login_form(request: Req) -> Response[str]:
    """The login page: a token, once, for a session cookie."""
    return _bare(request, "Log in", "<p>Paste a token (epochledger token create).</p>" + _login_form(request))


@post("/login", opt={"op": "console_login"}, sync_to_thread=True, include_in_schema=False)
def login(request: Req, data: Form) -> Response[str]:
    """A token for a session cookie (rule H10): Secure over https (or behind a proxy
    that says so), HttpOnly, SameSite=Strict. An unknown token: the form again (422),
    no cookie; the login route is public, so never a 401 (rule H4). The form's CSRF
    token must be its cookie's, as for an act (a 403 otherwise): no login CSRF."""
    check_csrf(request, data)
    token = data.get("token", "").strip()
    service: Any = request.app.state.service
    with service.use() as ledger:
        found = ledger.authenticate(token) if auth.well_formed(token) else None
    if found is None:
        return _bare(request, "Log in", '<p role="alert">Unknown or revoked token.</p>' + _login_form(request), 422)
    response: Response[str] = Response("", status_code=303, headers={"Location": "/"})
    response.set_cookie(
        Cookie(
            key=auth.SESSION_COOKIE,
            value=token,
            path="/",
            httponly=True,
            samesite="strict",
            secure=_secure(request),
            max_age=SESSION_MAX_AGE,
        )
    )
    response.set_cookie(_csrf_cookie(request, secrets.token_urlsafe(32)))  # a new session, a new CSRF token
    return response


@post("/logout", opt={"op": "console_login"}, include_in_schema=False)
async def logout(request: Req, data: Form) -> Response[str]:
    """End the session: the cookie is cleared, if the form's CSRF token is its cookie's
    (a 403 otherwise: another site cannot log the browser out)."""
    check_csrf(request, data)
    response: Response[str] = Response("", status_code=303, headers={"Location": "/login"})
    response.delete_cookie(auth.SESSION_COOKIE, path="/")
    return response


HEADERS = [
    ResponseHeader(name="Content-Security-Policy", value=CSP),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    ResponseHeader(name="Referrer-Policy", value="same-origin"),
]


def refused(request: Req, error: AccessRefused) -> Response[Any]:
    """A browser without a session asking for a page (GET, `Accept: text/html`) goes to
    the login page (303); a browser's page refused to its role (403), a page saying
    so; every other refusal, a script's included, is the service's problem document
    (epochledger/service/problems.py)."""
    browser = "text/html" in request.headers.get("accept", "")
    if error.status == 401 and request.method == "GET" and browser and not request.headers.get("authorization"):
        return Response("", status_code=303, headers={"Location": "/login"})
    if error.status == 403 and request.method == "GET" and browser:
        body = f'<p role="alert">{esc(error.detail)}</p><p><a href="/">Back to the fleet</a></p>'
        response = _bare(request, "Refused", body, 403)
        for header in HEADERS:  # an exception handler's response: the router's headers are not added
            response.headers[header.name] = header.value or ""
        return response
    return problems.access_refused(request, error)


ROUTER = Router(
    "/",
    route_handlers=[
        static,
        fleet,
        error_class_page,
        runs,
        run_page,
        epochs,
        incident,
        whatif,
        audit_page,
        audit_sql,
        confirm,
        act_correct,
        act_cancel,
        act_resume,
        login_form,
        login,
        logout,
    ],
    response_headers=HEADERS,
    exception_handlers={AccessRefused: refused},
    include_in_schema=False,
)
ROUTES: list[Any] = [ROUTER]
