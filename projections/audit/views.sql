-- Views over `events` and the tables sync derives from it (schema.sql; docs/audit.md).
-- Re-created by every `audit sync`.
-- No status appears as a literal here: every policy question is a column of
-- `lifecycle_predicates`, which sync computes from ledger/lifecycle.py (rule P3).

-- `transitions` (every run event with the status it left and the status it entered)
-- is a table, derived by sync from `events` (schema.sql): a view here sorted every run
-- event again for each query that read it.

-- Every time a run entered a failure status (lifecycle's is_failure): from a status
-- that is not a failure (or from none), or with a change of code. A correction from
-- one failure status to another with the same code, a checkpoint or a fenced report
-- that keeps the status, is the same failure, not a new one. The failure_codes and
-- failures_by_label reports count these rows; the empty code is UNKNOWN (rule L2).
CREATE OR REPLACE VIEW failure_entries AS
SELECT
    t.run,
    t.position,
    t.version,
    t.occurred_at,
    t.type,
    t.from_status,
    t.from_code,
    t.to_status AS status,
    t.failure_code AS code,
    t.actor,
    t.reason
FROM transitions t
JOIN lifecycle_predicates p ON p.status = t.to_status AND p.code = t.failure_code AND NOT p.fenced_end
LEFT JOIN lifecycle_predicates pf ON pf.status = t.from_status AND pf.code = t.from_code AND NOT pf.fenced_end
WHERE p.is_failure
  AND (pf.is_failure IS NOT TRUE OR t.from_code IS DISTINCT FROM t.failure_code);

-- Each run's current state: the status and code of its last event (each run event
-- carries its resulting status and code, rule L1), plus every lifecycle predicate.
-- Deleted runs are kept, with deleted = true. `workflow`, `labels` (a MAP, empty when
-- none) and `parent` are set when the run is queued (rule I2): `labels['team']`; they
-- are the table run_queued's, which sync derives (schema.sql).
CREATE OR REPLACE VIEW runs AS
WITH latest AS (
    SELECT
        run,
        arg_max(status, position) AS status,
        arg_max(code, position) AS code,
        arg_max(process, position) FILTER (WHERE process IS NOT NULL) AS process,
        arg_max_null(epoch, position) FILTER (WHERE type = 'run.started') AS epoch,
        min(occurred_at) FILTER (WHERE type = 'run.queued') AS queued_at,
        arg_max(occurred_at, position) FILTER (WHERE type = 'run.started') AS started_at,
        -- a fenced report changes nothing but the stream's version (rule F1): not who
        -- made the last transition, nor when, nor why (as ledger/run.py folds it)
        arg_max(occurred_at, position) FILTER (WHERE type <> 'run.fenced') AS updated_at,
        arg_max_null(actor, position) FILTER (WHERE type <> 'run.fenced') AS actor,
        arg_max_null(reason, position) FILTER (WHERE type <> 'run.fenced') AS reason,
        max(version) AS version,
        max(position) AS last_position,
        bool_or(type = 'run.deleted') AS deleted,
        max(position) FILTER (WHERE type = 'run.started') AS last_start_position,
        -- a fenced outcome report (run.fenced carrying `reported`) binds automation until
        -- the run's next start (rule F2)
        max(position) FILTER (WHERE type = 'run.fenced' AND payload->>'reported' IS NOT NULL) AS fenced_end_position,
        arg_max(epoch, position) FILTER (WHERE type = 'run.fenced' AND payload->>'reported' IS NOT NULL) AS fenced_end_epoch_any,
        count(*) FILTER (WHERE type = 'run.fenced') AS fenced,
        -- starts so far: each start after a resume or retry is the next attempt
        count(*) FILTER (WHERE type = 'run.started') AS attempt
    FROM events
    WHERE starts_with(stream, 'run:')
    GROUP BY run
), bound AS (
    SELECT l.run, l.status, l.code, q.workflow, q.parent,
           l.* EXCLUDE (run, status, code, fenced_end_epoch_any, fenced_end_position, last_start_position, attempt),
           CASE WHEN l.fenced_end_position > coalesce(l.last_start_position, 0) THEN l.fenced_end_epoch_any END
               AS fenced_end_epoch,
           coalesce(q.labels, MAP {}::MAP(VARCHAR, VARCHAR)) AS labels,
           l.attempt
    FROM latest l
    LEFT JOIN run_queued q ON q.run IS NOT DISTINCT FROM l.run
)
SELECT l.*, p.* EXCLUDE (status, code, fenced_end)
FROM bound l
LEFT JOIN lifecycle_predicates p
    ON p.status = l.status AND p.code = l.code AND p.fenced_end = (l.fenced_end_epoch IS NOT NULL);

-- Late reports of stale epochs, refused and kept as evidence (run.fenced, rules F1, F2):
-- which epoch, which report, the status it claimed (outcome reports only), and why the
-- epoch was stale. `binds_automation`: an outcome report after the run's last start,
-- so automation may not resume the run until it starts again.
CREATE OR REPLACE VIEW fenced_reports AS
SELECT
    e.run,
    e.position,
    e.occurred_at,
    e.epoch,
    e.payload->>'refused' AS refused,
    e.payload->>'reported' AS reported,
    e.payload->>'why' AS why,
    e.payload->>'superseded_by' AS superseded_by,
    e.status AS status_kept,
    e.payload->>'reported' IS NOT NULL AND e.position > coalesce(s.last_start, 0) AS binds_automation,
    e.payload->'report' AS report
FROM events e
LEFT JOIN (
    -- the last start of the fenced runs only: not an aggregate over every run
    SELECT run, max(position) AS last_start FROM events
    WHERE type = 'run.started' AND run IN (SELECT run FROM events WHERE type = 'run.fenced')
    GROUP BY run
) s ON s.run = e.run
WHERE e.type = 'run.fenced';

-- One row per boot of a process slot. An epoch is superseded by the next boot of the
-- same slot; it exited when a process.exited names it (the first one stands); its host
-- rebooted when a host boot id new to its machine was first recorded after its own host
-- boot id was (ledger/process.py evolve_host: each new id ends the one before it). A
-- host is its machine id, not its name (rule O10): a boot without one never ends any.
-- `live` is as of the last synced event (rules O2, O7). Positions order events
-- within the process's stream; across streams compare instants (docs/audit.md).
CREATE OR REPLACE VIEW epochs AS
WITH boots AS (
    SELECT
        process,
        epoch,
        (payload->>'booted_at')::TIMESTAMPTZ AS booted_at,
        occurred_at AS recorded_at,
        payload->>'host' AS host,
        TRY_CAST(payload->>'pid' AS BIGINT) AS pid,
        payload->>'host_boot' AS host_boot,
        TRY_CAST(payload->>'pid_start' AS BIGINT) AS pid_start,
        payload->>'machine' AS machine,
        actor,
        position AS boot_position,
        lead(epoch) OVER w AS superseded_by,
        lead(occurred_at) OVER w AS superseded_at,
        lead(position) OVER w AS superseded_position
    FROM events
    WHERE type = 'process.booted'
    WINDOW w AS (PARTITION BY process ORDER BY position)
), stops AS (
    SELECT
        process,
        epoch,
        min(occurred_at) FILTER (WHERE type = 'process.stopping') AS stopping_at,
        min(occurred_at) FILTER (WHERE type = 'process.stopped') AS stopped_at,
        min(position) FILTER (WHERE type = 'process.stopped') AS stopped_position,
        min(occurred_at) FILTER (WHERE type = 'process.exited') AS exited_at,
        min(position) FILTER (WHERE type = 'process.exited') AS exited_position,
        arg_min(payload->>'observed_by', position) FILTER (WHERE type = 'process.exited') AS exited_by
    FROM events
    WHERE type IN ('process.stopping', 'process.stopped', 'process.exited')
    GROUP BY process, epoch
), host_boots AS (
    -- the boot that first recorded a host boot id, and when it was recorded
    SELECT machine, host_boot, min(boot_position) AS first_position,
        arg_min_null(recorded_at, boot_position) AS first_recorded_at
    FROM boots WHERE machine IS NOT NULL AND host_boot IS NOT NULL
    GROUP BY machine, host_boot
), host_ends AS (
    SELECT machine, host_boot,
        lead(host_boot) OVER h AS rebooted_to,
        lead(first_recorded_at) OVER h AS rebooted_at,
        lead(first_position) OVER h AS rebooted_position
    FROM host_boots
    WINDOW h AS (PARTITION BY machine ORDER BY first_position)
)
SELECT
    b.*,
    s.stopping_at,
    s.stopped_at,
    s.stopped_position,
    s.exited_at,
    s.exited_position,
    s.exited_by,
    h.rebooted_to,
    h.rebooted_at,
    h.rebooted_position,
    (b.superseded_by IS NULL AND s.stopped_at IS NULL AND s.exited_at IS NULL AND h.rebooted_position IS NULL) AS live
FROM boots b
LEFT JOIN stops s ON s.process = b.process AND s.epoch = b.epoch
LEFT JOIN host_ends h ON h.machine = b.machine AND h.host_boot = b.host_boot;

-- Sweep recoveries (run.recovered, rule O5): who recovered the run (the sweeping
-- epoch), which epoch owned it (as the event says; else the epoch of the run's last
-- run.started before the recovery), the rule applied, and the evidence exactly as
-- recorded (the whole event: superseded_by, stopped_at, booted_at, cutoff, margin...).
CREATE OR REPLACE VIEW recoveries AS
SELECT
    e.run,
    e.position,
    e.occurred_at,
    coalesce(e.payload->>'swept_by', e.actor) AS recovered_by,
    e.payload->>'swept_by_process' AS recovered_by_process,
    e.payload->>'rule' AS rule,
    coalesce(e.payload->>'owner_epoch', s.epoch) AS owner_epoch,
    coalesce(e.payload->>'owner_process', s.process) AS owner_process,
    e.status,
    e.code,
    e.reason,
    e.payload AS evidence
FROM events e
ASOF LEFT JOIN (
    -- the starts of the recovered runs only: not every run's
    SELECT run, position, epoch, process FROM events
    WHERE type = 'run.started' AND run IN (SELECT run FROM events WHERE type = 'run.recovered')
) s ON s.run = e.run AND e.position > s.position
WHERE e.type = 'run.recovered';

-- Dead-letters by the tick driver (run.dead_lettered, rule T2): the streak and the
-- bound as the event recorded them (docs/tick.md).
CREATE OR REPLACE VIEW dead_letters AS
SELECT
    run,
    position,
    occurred_at,
    status,
    code,
    payload->>'tick' AS tick,
    payload->>'step' AS step,
    payload->>'error_class' AS error_class,
    payload->>'error' AS error,
    TRY_CAST(payload->>'failing_since' AS TIMESTAMPTZ) AS failing_since,
    TRY_CAST(payload->>'failures' AS BIGINT) AS failures,
    TRY_CAST(payload->>'deadline_s' AS DOUBLE) AS deadline_s,
    payload->>'cleanup_error' AS cleanup_error,
    actor,
    reason,
    payload
FROM events
WHERE type = 'run.dead_lettered';

-- Audited corrections (run.corrected): a run moved out of a final status, by whom
-- and why, with the status it had before.
CREATE OR REPLACE VIEW corrections AS
SELECT
    t.run,
    t.position,
    t.occurred_at,
    t.from_status,
    t.from_code,
    t.to_status,
    t.failure_code,
    t.actor,
    t.reason,
    e.payload
FROM transitions t
JOIN events e ON e.position = t.position
-- e.type is t.type (the same event): said on both sides, so neither side of the join is
-- every event (the planner built its hash table on all of them)
WHERE t.type = 'run.corrected' AND e.type = 'run.corrected';
