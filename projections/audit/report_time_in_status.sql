-- Time in status: how long runs stayed in each status, p50 / p95 / max in seconds,
-- per workflow, over the stays that ended by $as_of. A stay ends at the run's next
-- status change or its deletion; `still_in` counts the stays open at $as_of.
WITH changes AS (
    SELECT
        t.run,
        CASE WHEN t.type = 'run.deleted' THEN NULL ELSE t.to_status END AS status,
        t.occurred_at AS entered_at,
        lead(t.occurred_at) OVER (PARTITION BY t.run ORDER BY t.position) AS left_at
    FROM transitions t
    WHERE (t.from_status IS DISTINCT FROM t.to_status OR t.type = 'run.deleted')
      AND t.occurred_at <= $as_of
)
SELECT
    coalesce(r.workflow, '(none)') AS workflow,
    c.status,
    count(c.left_at) AS stays,
    round(quantile_cont(epoch(c.left_at) - epoch(c.entered_at), 0.5), 3) AS p50_seconds,
    round(quantile_cont(epoch(c.left_at) - epoch(c.entered_at), 0.95), 3) AS p95_seconds,
    round(max(epoch(c.left_at) - epoch(c.entered_at)), 3) AS max_seconds,
    count(*) FILTER (WHERE c.left_at IS NULL) AS still_in
FROM changes c
JOIN runs r ON r.run = c.run
WHERE c.status IS NOT NULL
GROUP BY ALL
ORDER BY workflow, c.status;
