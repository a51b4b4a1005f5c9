"""Store URLs, parsed once for every command and backend (rule L4: a bad URL is a clear
error naming what is wrong, never a traceback, and never a silent default).

    sqlite:///relative.db    sqlite:////absolute/path.db    a bare path
    postgresql://user[:password]@host[:port]/db[?schema=name&connect_timeout=S&...]

Which store, when none is named: $EPOCHLEDGER_STORE, then ./epochledger.db. A store
named as the empty string is refused: it is a mistake (an unset shell variable), not a
request for the default.
"""

from __future__ import annotations

import os
from typing import NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from epochledger.ledger.errors import InvalidInput

DEFAULT_PATH = "epochledger.db"
WHERE = "store URL"


class SQLiteURL(NamedTuple):
    path: str  # absolute

    @property
    def url(self) -> str:
        return "sqlite:///" + self.path


class PostgresURL(NamedTuple):
    url: str  # as given
    host: str
    port: int
    dbname: str
    role: str
    password: str | None
    schema: str
    query: dict[str, str]  # every query parameter but none repeated (the last wins)


def resolve_url(url: str | None) -> str:
    """The URL to open: `url`, else $EPOCHLEDGER_STORE (if set and not empty), else
    ./epochledger.db. An explicit empty string is refused."""
    if url is None:
        return os.environ.get("EPOCHLEDGER_STORE") or DEFAULT_PATH
    if not isinstance(url, str):
        raise InvalidInput(f"a store URL is a string, got {type(url).__name__}", where=WHERE)
    if not url.strip():
        raise InvalidInput(
            "the store URL is empty; name a store (sqlite:///file.db, postgresql://...) or leave it "
            f"out for $EPOCHLEDGER_STORE, then ./{DEFAULT_PATH}",
            where=WHERE,
        )
    return url


def parse_url(url: str | None) -> SQLiteURL | PostgresURL:
    """The one parser of store URLs. Raises InvalidInput naming what is wrong."""
    url = resolve_url(url)
    if "\x00" in url:
        raise InvalidInput(f"a store URL has no NUL characters, got {url!r}", where=WHERE)
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"a store URL must be valid UTF-8 text, got {url!r}", where=WHERE) from None
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        try:
            parts = urlsplit(url)
            port = parts.port or 5432
        except ValueError as e:
            raise InvalidInput(
                f"not a valid PostgreSQL URL ({e}): postgresql://user@host:port/db", where=WHERE
            ) from None
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        return PostgresURL(
            url=url,
            host=parts.hostname or "localhost",
            port=port,
            dbname=unquote(parts.path.lstrip("/")) or "postgres",
            role=unquote(parts.username or "") or os.environ.get("PGUSER") or "postgres",
            password=unquote(parts.password) if parts.password else None,
            schema=query.get("schema") or "public",
            query=query,
        )
    if scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.lower().startswith("sqlite:///") else ""
        if not path:
            raise InvalidInput(
                f"SQLite URL needs a path: sqlite:///relative.db or sqlite:////abs.db, got {url!r}", where=WHERE
            )
    elif scheme:
        raise InvalidInput(f"unsupported store URL scheme {scheme!r} (use sqlite:/// or postgresql://)", where=WHERE)
    elif "://" in url:  # not a path anyone means: "://" alone made a file named ':' in the working directory
        raise InvalidInput(
            f"a store URL needs a scheme before '://' (sqlite:/// or postgresql://), got {url!r}", where=WHERE
        )
    else:
        path = url
    if path == ":memory:":  # SQLite's name for a private in-memory database; here it would be a file so named
        raise InvalidInput(
            "an in-memory SQLite store is not supported: the ledger's connections would each see "
            "their own empty database; name a file (sqlite:///runs.db)",
            where=WHERE,
        )
    return SQLiteURL(os.path.abspath(path))
