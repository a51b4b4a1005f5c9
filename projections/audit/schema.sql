-- The audit file's base tables (docs/audit.md). Created by `epochledger audit sync`;
-- everything else in the file is a view over these tables (projections/audit/views.sql).
-- `events` is the ledger's rows as stored; `transitions`, `run_stream_heads`,
-- `run_queued` and `stays` are derived from `events` alone, by sync, in the same
-- transaction as the rows they are derived from (projections/audit/duck.py, _derive),
-- so they never disagree with them.

-- One row per ledger event, as stored. Common fields are columns; `payload` is the
-- whole event exactly as the ledger holds it, so fields and codes this version does
-- not know survive (rule L3). `occurred_at` is the event's "at" (in DuckDB 2 `at`
-- is a keyword and would have to be quoted in every query). The payload is stored
-- zstd-compressed: half the bytes of DuckDB's default (dictionary + FSST) for these
-- ~120-byte JSON texts, and a fifth less CPU for sync (docs/benchmarks.md).
CREATE TABLE IF NOT EXISTS events (
    position    BIGINT NOT NULL,   -- notification position in the ledger (gapped on PostgreSQL)
    stream      VARCHAR NOT NULL,  -- run:<id> or process:<name>
    version     BIGINT NOT NULL,   -- place in the stream, from 1
    type        VARCHAR,           -- the event tag, e.g. run.failed (NULL only if undecodable)
    occurred_at TIMESTAMPTZ,       -- the event's "at", UTC
    run         VARCHAR,
    process     VARCHAR,
    epoch       VARCHAR,
    status      VARCHAR,           -- resulting status (run events)
    code        VARCHAR,           -- resulting failure code; '' = UNKNOWN on a failure status
    actor       VARCHAR,
    reason      VARCHAR,
    payload     JSON NOT NULL USING COMPRESSION zstd
);

-- Every run event with the status and code of its stream's previous event (by version;
-- NULL on a stream's first event): what `lag(status) OVER (PARTITION BY stream ORDER BY
-- version)` over the run streams of `events` gives, kept so that no report sorts every
-- event again. run.checkpointed and run.deleted keep the status (from_status = to_status).
CREATE TABLE IF NOT EXISTS transitions (
    run          VARCHAR,
    position     BIGINT NOT NULL,
    version      BIGINT NOT NULL,
    occurred_at  TIMESTAMPTZ,
    type         VARCHAR,
    from_status  VARCHAR,
    to_status    VARCHAR,
    from_code    VARCHAR,
    failure_code VARCHAR,
    actor        VARCHAR,
    reason       VARCHAR
);

-- The event of each run stream with the highest version so far: the one the stream's
-- next synced event follows (sync's lookup, so a chunk never sorts the whole history).
CREATE TABLE IF NOT EXISTS run_stream_heads (
    stream  VARCHAR NOT NULL,  -- one row a stream (no key: an index would double the file)
    version BIGINT NOT NULL,
    status  VARCHAR,
    code    VARCHAR
);

-- What each run was queued with (rule I2), from its run.queued events: the workflow of
-- the last one that names one, the labels (NULL: none, or not a map of text) and the
-- parent of the last one. The runs view reads them here; a run never queued has no row.
CREATE TABLE IF NOT EXISTS run_queued (
    run      VARCHAR,
    workflow VARCHAR,
    labels   MAP(VARCHAR, VARCHAR),
    parent   VARCHAR
);

-- One row per stay of a run in a status (time_in_status): each status change of
-- `transitions` (from_status IS DISTINCT FROM to_status) or deletion, with an instant,
-- in position order per run. `status` is NULL for a deletion (it only ends the stay
-- before it) and for an event without one; `left_at` is the next row's entered_at
-- (NULL: the stay is open); `workflow` is the run's, as run_queued says.
CREATE TABLE IF NOT EXISTS stays (
    run        VARCHAR NOT NULL,
    position   BIGINT NOT NULL,
    workflow   VARCHAR,
    status     VARCHAR,
    entered_at TIMESTAMPTZ NOT NULL,
    left_at    TIMESTAMPTZ
);

-- Where the last sync stopped: one row, updated in the same transaction as the rows.
CREATE TABLE IF NOT EXISTS audit_sync (
    store          VARCHAR NOT NULL,  -- the ledger this file mirrors
    position       BIGINT NOT NULL,   -- last notification position copied
    schema_version INTEGER NOT NULL,
    predicates     VARCHAR NOT NULL   -- signature of the lifecycle predicates table
);
