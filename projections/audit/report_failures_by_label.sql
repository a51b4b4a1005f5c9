-- Failures by label (rule I2): how many times runs entered a failure status up to
-- $as_of, by label and value and failure code. Every label of every failed run, or,
-- with --label KEY ($label), that label alone, with a row (value NULL) for the
-- failures of runs that do not carry it. A run's labels are those it was queued with
-- (the table run_queued, as the runs view has them; a run never queued has none).
-- Entering a failure status is the view failure_entries (views.sql), as in
-- failure_codes; the empty code is UNKNOWN.
WITH failures AS (
    SELECT run, code
    FROM failure_entries
    WHERE occurred_at <= $as_of AND run IS NOT NULL
), labelled AS (
    -- only the runs that carry a label have a row here: the others are not read
    SELECT f.run, f.code, l.key AS label, l.value AS value
    FROM failures f
    JOIN (SELECT run, labels FROM run_queued WHERE cardinality(labels) > 0) q ON q.run = f.run,
        unnest(map_entries(q.labels)) AS e(l)
    WHERE $label::VARCHAR IS NULL OR l.key = $label::VARCHAR
    UNION ALL
    SELECT f.run, f.code, $label::VARCHAR, NULL
    FROM failures f
    LEFT JOIN run_queued q ON q.run = f.run
    WHERE $label::VARCHAR IS NOT NULL
      AND NOT map_contains(coalesce(q.labels, MAP {}::MAP(VARCHAR, VARCHAR)), $label::VARCHAR)
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
