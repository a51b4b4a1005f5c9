-- Runs marked orphaned while the epoch that owned them was live (BRIEF O2: must be
-- none). A mark is a run.recovered event, or any run event that newly sets the code
-- PROCESS_ORPHANED. The owner is the epoch of the run's last run.started before the
-- mark; it was live if its boot was recorded at or before the mark and it was neither
-- superseded by a later boot of its process nor cleanly stopped at or before the mark.
-- Instants, not positions, order events of different streams: one batch (an NDJSON
-- import) appends its streams one after the other, so positions across streams need
-- not follow time (docs/audit.md). Returns the offending marks up to $as_of; an empty
-- result proves the invariant on the data.
WITH marked AS (
    SELECT
        run, position, occurred_at, type, code, actor,
        lag(code) OVER (PARTITION BY stream ORDER BY version) AS previous_code
    FROM events
    WHERE starts_with(stream, 'run:')
), marks AS (
    SELECT m.*, s.epoch AS owner_epoch, s.process AS owner_process
    FROM marked m
    ASOF LEFT JOIN (
        SELECT run, position, epoch, process FROM events WHERE type = 'run.started'
    ) s ON s.run = m.run AND m.position > s.position
    WHERE (m.type = 'run.recovered'
           OR (m.code = 'PROCESS_ORPHANED' AND m.previous_code IS DISTINCT FROM 'PROCESS_ORPHANED'))
      AND m.occurred_at <= $as_of
)
SELECT
    m.position,
    m.occurred_at,
    m.run,
    m.type,
    m.actor AS marked_by,
    m.owner_epoch,
    ep.process AS owner_process,
    ep.recorded_at AS owner_booted_at,
    ep.superseded_at AS owner_superseded_at,
    ep.stopped_at AS owner_stopped_at
FROM marks m
JOIN epochs ep ON ep.epoch = m.owner_epoch
WHERE ep.recorded_at <= m.occurred_at
  AND (ep.superseded_at IS NULL OR ep.superseded_at > m.occurred_at)
  AND (ep.stopped_at IS NULL OR ep.stopped_at > m.occurred_at)
ORDER BY m.position;
