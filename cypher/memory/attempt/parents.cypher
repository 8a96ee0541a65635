// The parents the new decisions start from (outside the batch): speed and code.
UNWIND $parent_uids AS pu
MATCH (p:Decision {uid: pu})
OPTIONAL MATCH (p)-[:WROTE]->(k:Kernel)
RETURN p.uid AS uid, p.id AS id, p.a AS a, p.status AS status, k.source AS source
