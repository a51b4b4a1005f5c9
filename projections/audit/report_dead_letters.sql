-- Dead-letters: every run the tick driver dead-lettered up to $as_of, with the step
-- and error that kept failing, how long and how often, and the bound it outlived.
SELECT position, occurred_at, run, code, step, error_class, error, failing_since, failures,
       deadline_s, cleanup_error, reason
FROM dead_letters
WHERE occurred_at <= $as_of
ORDER BY position;
