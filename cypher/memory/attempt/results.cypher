// What the graph holds for these decisions after a write.
UNWIND $uids AS u
MATCH (d:Decision {uid: u})-[:IN_RUN]->(run:Run)
RETURN d.uid AS uid, d.id AS id, d.a AS a, d.r AS r, d.label AS label, d.d AS d,
       run.incumbent_id AS incumbent_id
