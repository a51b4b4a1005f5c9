-- Failure codes by period: how many times runs entered a failure status with each
-- code, per $period (hour, day, week, month, ...), up to $as_of, with the count of the
-- period before, so a code that grew stands out. The empty code is shown as UNKNOWN.
-- What counts as entering a failure status is the view failure_entries (views.sql).
WITH failures AS (
    SELECT date_trunc($period, occurred_at) AS period, code, run
    FROM failure_entries
    WHERE occurred_at <= $as_of
), counts AS (
    SELECT period, code, count(*) AS failures, count(DISTINCT run) AS runs
    FROM failures
    GROUP BY period, code
)
SELECT
    c.period,
    CASE WHEN c.code = '' THEN 'UNKNOWN' ELSE c.code END AS code,
    c.failures,
    c.runs,
    coalesce(prev.failures, 0) AS previous_period,
    c.failures - coalesce(prev.failures, 0) AS change
FROM counts c
LEFT JOIN counts prev
    ON prev.code = c.code
   AND prev.period = date_trunc($period, c.period - INTERVAL 1 MICROSECOND)
ORDER BY c.period, c.failures DESC, code;
