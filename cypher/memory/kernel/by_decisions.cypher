// mode: read
// The kernel sources several decisions wrote (null for one that wrote none), in one statement.
UNWIND $uids AS uid
MATCH (d:Decision {uid: uid})
OPTIONAL MATCH (d)-[:WROTE]->(k:Kernel)
RETURN d.id AS id, k.source AS source
