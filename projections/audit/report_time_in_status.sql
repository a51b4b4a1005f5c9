-- Time in status: how long runs stayed in each status, p50 / p95 / max in seconds,
-- per workflow, over the stays that ended by $as_of. A stay ends at the run's next
-- status change or its deletion; `still_in` counts the stays open at $as_of.
-- The stays are the table sync derives (schema.sql). As of $as_of a stay exists if it
-- was entered by then, and it ended at the next stay of its run entered by then: for a
-- run whose stays were entered in the order of the log, that is its left_at if not
-- after $as_of (else it is open); the few runs whose clock stepped back between two
-- stays (a left_at before its entered_at) have their stays as of $as_of followed again.
WITH disordered AS (
    SELECT DISTINCT run FROM stays WHERE left_at < entered_at
), as_of AS (
    SELECT s.workflow, s.status, s.entered_at, CASE WHEN s.left_at <= $as_of THEN s.left_at END AS left_at
    FROM stays s ANTI JOIN disordered d ON d.run = s.run
    WHERE s.entered_at <= $as_of AND s.status IS NOT NULL
    UNION ALL
    SELECT * EXCLUDE (run) FROM (
        SELECT s.run, s.workflow, s.status, s.entered_at,
               lead(s.entered_at) OVER (PARTITION BY s.run ORDER BY s.position) AS left_at
        FROM stays s SEMI JOIN disordered d ON d.run = s.run
        WHERE s.entered_at <= $as_of
    )
    WHERE status IS NOT NULL
)
SELECT
    coalesce(workflow, '(none)') AS workflow,
    status,
    count(left_at) AS stays,
    round(quantile_cont(epoch(left_at) - epoch(entered_at), 0.5), 3) AS p50_seconds,
    round(quantile_cont(epoch(left_at) - epoch(entered_at), 0.95), 3) AS p95_seconds,
    round(max(epoch(left_at) - epoch(entered_at)), 3) AS max_seconds,
    count(*) FILTER (WHERE left_at IS NULL) AS still_in
FROM as_of
GROUP BY ALL
ORDER BY workflow, status;
