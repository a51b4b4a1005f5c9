-- Fenced reports: every late report of a stale epoch up to $as_of, refused and kept as
-- evidence (rules F1, F2), oldest first: which run and epoch, what the report was and
-- the status it claimed, why the epoch was stale, and whether it still binds
-- automation (an outcome report made after the run's last start).
SELECT position, occurred_at, run, epoch, refused, reported, why, superseded_by, status_kept,
       binds_automation
FROM fenced_reports
WHERE occurred_at <= $as_of
ORDER BY position;
