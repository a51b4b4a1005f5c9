-- Runs marked orphaned while the epoch that owned them was live (BRIEF O2: must be
-- none). A mark is a run.recovered event, or any run event that newly sets the code
-- PROCESS_ORPHANED. The owner is the epoch of the run's last run.started before the
-- mark; it was live if it had booted and was neither superseded by a later boot of its
-- process nor cleanly stopped before the mark, in log order. Returns the offending
-- marks up to $as_of; an empty result proves the invariant on the data.
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
    ep.boot_position,
    ep.superseded_position,
    ep.stopped_position
FROM marks m
JOIN epochs ep ON ep.epoch = m.owner_epoch
WHERE ep.boot_position < m.position
  AND (ep.superseded_position IS NULL OR ep.superseded_position > m.position)
  AND (ep.stopped_position IS NULL OR ep.stopped_position > m.position)
ORDER BY m.position;
