-- Failure codes by period: how many times runs entered a failure status with each
-- code, per $period (hour, day, week, month, ...), up to $as_of, with the count of the
-- period before, so a code that grew stands out. The empty code is shown as UNKNOWN.
-- Entering = from a status that is not a failure, or a change of code; a correction
-- from one failure status to another with the same code is the same failure.
WITH failures AS (
    SELECT
        date_trunc($period, t.occurred_at) AS period,
        t.failure_code AS code,
        t.run
    FROM transitions t
    JOIN lifecycle_predicates p ON p.status = t.to_status AND p.code = t.failure_code AND NOT p.fenced_end
    LEFT JOIN lifecycle_predicates pf ON pf.status = t.from_status AND pf.code = t.from_code AND NOT pf.fenced_end
    WHERE p.is_failure
      AND (pf.is_failure IS NOT TRUE OR t.from_code IS DISTINCT FROM t.failure_code)
      AND t.occurred_at <= $as_of
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
