// The decisions of these runs in step order, each with its current NEXT.
UNWIND $run_ids AS rid
MATCH (d:Decision {ns: $ns, run_id: rid})
OPTIONAL MATCH (d)-[:NEXT]->(n:Decision)
RETURN rid AS run_id, d.uid AS uid, d.step AS step, n.uid AS next_uid
ORDER BY run_id, step
