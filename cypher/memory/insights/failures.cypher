// mode: read
// Failed attempts grouped by (family, hardware class, error kind): the raw
// material of validity rules. Newest first inside a group, so the first
// excerpt is the latest one.
MATCH (d:Decision)-[:PRODUCED]->(o:Outcome)
WHERE d.ns = $ns AND ($family IS NULL OR d.family = $family)
  AND d.status <> 'correct' AND d.error_kind IS NOT NULL
WITH d, o ORDER BY d.created_at DESC, d.id DESC
WITH d.family AS family, d.hw_class AS hw_class, d.error_kind AS error_kind,
     collect(o.uid) AS outcomes, collect(d.layer) AS layers,
     collect(DISTINCT d.operator) AS operators, collect(DISTINCT d.hw_id) AS hardware,
     head(collect(o.error_excerpt)) AS latest_excerpt
RETURN family, hw_class, error_kind, outcomes, layers, operators, hardware, latest_excerpt
ORDER BY family, hw_class, error_kind
