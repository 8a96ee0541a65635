// mode: read
// The lineage page: the evidence every decision's prompt carried (USED edges),
// with what each piece is, in tier and rank order.
MATCH (d:Decision)-[u:USED]->(e)
WHERE d.ns = $ns AND ($operator IS NULL OR d.operator = $operator)
RETURN d.id AS decision, u.tier AS tier, u.rank AS rank, u.tokens AS tokens,
       [l IN labels(e) WHERE l IN ['Decision', 'Insight', 'Knowledge']][0] AS kind, e.id AS id,
       coalesce(e.caption, e.title, e.text) AS what
ORDER BY decision, tier DESC, rank
