-- Dead-letters: every run the tick driver dead-lettered up to $as_of, with the length
-- and start of the failure streak that led to it.
SELECT position, occurred_at, run, status, code, streak_failures, streak_started_at, actor, reason
FROM dead_letters
WHERE occurred_at <= $as_of
ORDER BY position;
