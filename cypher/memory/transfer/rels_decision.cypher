// mode: read
// Export page: relationships leaving Decision nodes of one namespace, grouped per
// source node, in uid order, after $after. The target's label is the one of
// $labels it has (Decision and Outcome carry extra labels for people).
MATCH (a:Decision)
USING INDEX a:Decision(uid)
WHERE a.uid STARTS WITH $prefix AND a.uid > $after
WITH a ORDER BY a.uid LIMIT $limit
OPTIONAL MATCH (a)-[r]->(b)
WITH a, r, b ORDER BY type(r), b.uid
RETURN a.uid AS uid,
       collect(CASE WHEN r IS NULL THEN NULL
                    ELSE {type: type(r), to_label: [l IN labels(b) WHERE l IN $labels][0], to: b.id, props: properties(r)} END) AS rels
ORDER BY uid
