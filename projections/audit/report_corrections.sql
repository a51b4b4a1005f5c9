-- Corrections: every audited correction up to $as_of, oldest first: which run, from
-- which status to which, who made it and why.
SELECT position, occurred_at, run, from_status, from_code, to_status, failure_code, actor, reason
FROM corrections
WHERE occurred_at <= $as_of
ORDER BY position;
