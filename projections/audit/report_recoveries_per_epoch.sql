-- Recoveries per epoch: for each sweeping epoch (a deploy), how many runs its sweep
-- recovered up to $as_of, which ones, from which owner epochs, with the evidence each
-- recovery event recorded.
SELECT
    r.recovered_by AS epoch,
    ep.process,
    ep.booted_at,
    count(*) AS recovered,
    list(r.run ORDER BY r.position) AS runs,
    list(DISTINCT r.owner_epoch ORDER BY r.owner_epoch) AS owner_epochs,
    to_json(list({'run': r.run, 'position': r.position, 'owner_epoch': r.owner_epoch,
                  'evidence': r.evidence} ORDER BY r.position)) AS evidence
FROM recoveries r
LEFT JOIN epochs ep ON ep.epoch = r.recovered_by
WHERE r.occurred_at <= $as_of
GROUP BY r.recovered_by, ep.process, ep.booted_at
ORDER BY min(r.position);
