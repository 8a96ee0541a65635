// mode: read
// Effective attempts grouped by (family, hardware class, optimization layer):
// the raw material of patterns. Best step ratio first inside a group.
MATCH (d:Decision)-[:PRODUCED]->(o:Outcome)
WHERE d.ns = $ns AND ($family IS NULL OR d.family = $family) AND d.label = 'effective'
WITH d, o ORDER BY d.r DESC, d.id ASC
WITH d.family AS family, d.hw_class AS hw_class, d.layer AS layer,
     collect(o.uid) AS outcomes, collect(d.r) AS ratios, collect(d.title) AS titles,
     collect(DISTINCT d.operator) AS operators, collect(DISTINCT d.hw_id) AS hardware
RETURN family, hw_class, layer, outcomes, ratios, titles, operators, hardware
ORDER BY family, hw_class, layer
