// mode: read
// Every decision's r, parent and stored d(v): for recomputing d from scratch.
MATCH (d:Decision)
USING INDEX SEEK d:Decision(ns)
WHERE d.ns = $ns
RETURN d.id AS id, d.r AS r, d.parent_id AS parent_id, d.d AS d
