// mode: read
// The lineage page: the runs of a namespace (or of one operator) in start order.
MATCH (r:Run)
WHERE r.ns = $ns AND ($operator IS NULL OR r.operator = $operator)
RETURN r.id AS id, r.operator AS operator, r.family AS family, r.caption AS caption, r.team AS team,
       r.proposer AS proposer, r.context_policy AS policy, r.memory_enabled AS memory,
       r.started_at AS started_at, r.incumbent_id AS incumbent_id, r.best_speedup AS best_speedup,
       coalesce(r.steps, 0) AS steps, r.status AS status
ORDER BY operator, started_at, id
