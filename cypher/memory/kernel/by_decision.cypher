// mode: read
// The kernel source a decision wrote (null when it wrote none).
MATCH (d:Decision {uid: $uid})
OPTIONAL MATCH (d)-[:WROTE]->(k:Kernel)
RETURN d.id AS id, k.source AS source
