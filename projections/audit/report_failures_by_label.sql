-- Failures by label (rule I2): how many times runs entered a failure status up to
-- $as_of, by label and value and failure code. Every label of every failed run, or,
-- with --label KEY ($label), that label alone, with a row (value NULL) for the
-- failures of runs that do not carry it. A run's labels are those it was queued with.
-- Entering a failure status is counted as in failure_codes; the empty code is UNKNOWN.
WITH failures AS (
    SELECT t.run, t.failure_code AS code
    FROM transitions t
    JOIN lifecycle_predicates p ON p.status = t.to_status AND p.code = t.failure_code AND NOT p.fenced_end
    LEFT JOIN lifecycle_predicates pf ON pf.status = t.from_status AND pf.code = t.from_code AND NOT pf.fenced_end
    WHERE p.is_failure
      AND (pf.is_failure IS NOT TRUE OR t.from_code IS DISTINCT FROM t.failure_code)
      AND t.occurred_at <= $as_of
), labelled AS (
    SELECT f.run, f.code, l.key AS label, l.value AS value
    FROM failures f
    JOIN runs r ON r.run = f.run, unnest(map_entries(r.labels)) AS e(l)
    WHERE $label::VARCHAR IS NULL OR l.key = $label::VARCHAR
    UNION ALL
    SELECT f.run, f.code, $label::VARCHAR, NULL
    FROM failures f
    JOIN runs r ON r.run = f.run
    WHERE $label::VARCHAR IS NOT NULL AND NOT map_contains(r.labels, $label::VARCHAR)
)
SELECT
    label,
    value,
    CASE WHEN code = '' THEN 'UNKNOWN' ELSE code END AS code,
    count(*) AS failures,
    count(DISTINCT run) AS runs
FROM labelled
GROUP BY label, value, code
ORDER BY label, failures DESC, value NULLS LAST, code;
