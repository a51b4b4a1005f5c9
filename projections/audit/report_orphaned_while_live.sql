-- Runs marked orphaned while the epoch that owned them was live (rule O2: must be
-- none). A mark is a run.recovered event, or any run event that newly sets the code
-- PROCESS_ORPHANED. The owner is the epoch the mark names (run.recovered's
-- owner_epoch), else the epoch of the run's last run.started before the mark. It was
-- live if its boot was recorded at or before the mark and, at or before the mark, it
-- was neither superseded by a later boot of its process, cleanly stopped, recorded as
-- exited, nor ended by a reboot of its host: instants, as the sweep judges them
-- (rules O2, O4, O7). Returns the offending marks up to $as_of;
-- an empty result proves the invariant on the data.
WITH marked AS (
    -- transitions carries each event's previous code (from_code): no sort of every event
    SELECT t.run, t.position, t.occurred_at, t.type, t.failure_code AS code, t.actor
    FROM transitions t
    WHERE (t.type = 'run.recovered'
           OR (t.failure_code = 'PROCESS_ORPHANED' AND t.from_code IS DISTINCT FROM 'PROCESS_ORPHANED'))
      AND t.occurred_at <= $as_of
), marks AS (
    SELECT m.*, coalesce(e.payload->>'owner_epoch', s.epoch) AS owner_epoch
    FROM marked m
    JOIN events e ON e.position = m.position
    ASOF LEFT JOIN (
        -- the starts of the marked runs only
        SELECT run, position, epoch, process FROM events
        WHERE type = 'run.started' AND run IN (SELECT run FROM marked)
    ) s ON s.run = m.run AND m.position > s.position
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
    ep.stopped_at AS owner_stopped_at,
    ep.exited_at AS owner_exited_at,
    ep.rebooted_at AS owner_host_rebooted_at
FROM marks m
JOIN epochs ep ON ep.epoch = m.owner_epoch
WHERE ep.recorded_at <= m.occurred_at
  AND (ep.superseded_at IS NULL OR ep.superseded_at > m.occurred_at)
  AND (ep.stopped_at IS NULL OR ep.stopped_at > m.occurred_at)
  AND (ep.exited_at IS NULL OR ep.exited_at > m.occurred_at)
  AND (ep.rebooted_at IS NULL OR ep.rebooted_at > m.occurred_at)
ORDER BY m.position;
