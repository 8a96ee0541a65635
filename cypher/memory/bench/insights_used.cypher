// mode: read
// For each decision of a run: the insights (validity rules, patterns, effects) its prompt used,
// with the hardware class each was learned on (a bench's transfer comparison reads them).
MATCH (d:Decision {ns: $ns, run_id: $run_id})
USING INDEX SEEK d:Decision(ns, run_id)
OPTIONAL MATCH (d)-[:USED]->(i:Insight)
WITH d, i ORDER BY i.id
RETURN d.id AS id, [x IN collect(i) | x {.id, .kind, .hw_class}] AS insights
ORDER BY id
