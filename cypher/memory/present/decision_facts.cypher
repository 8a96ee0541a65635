// mode: read
// A page of a namespace's decisions (uid order, after $after) with the facts
// their presentation is derived from, the parent's speed and the outcome's
// as-deployed speedup included.
MATCH (d:Decision)
USING INDEX d:Decision(uid)
WHERE d.uid STARTS WITH $prefix AND d.uid > $after
WITH d ORDER BY d.uid LIMIT $limit
OPTIONAL MATCH (d)-[:FROM]->(p:Decision)
OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
RETURN d.uid AS uid, d.operator AS operator, d.step AS step, d.title AS title, d.status AS status, d.a AS a, d.r AS r,
       d.parent_id AS parent_id, p.a AS parent_a, d.params_json AS params_json, o.cases_json AS cases_json,
       o.deployed_speedup AS deployed_speedup
ORDER BY uid
