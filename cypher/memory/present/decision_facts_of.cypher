// mode: read
// These decisions (uids) with the facts their presentation is derived from
// (the same columns as memory/present/decision_facts, which pages a namespace).
UNWIND $uids AS u
MATCH (d:Decision {uid: u})
OPTIONAL MATCH (d)-[:FROM]->(p:Decision)
OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
RETURN d.uid AS uid, d.operator AS operator, d.step AS step, d.title AS title, d.status AS status, d.a AS a, d.r AS r,
       d.parent_id AS parent_id, p.a AS parent_a, d.params_json AS params_json, o.cases_json AS cases_json,
       o.deployed_speedup AS deployed_speedup
ORDER BY uid
