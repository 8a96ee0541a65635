// The decisions of these runs in step order, each with its current NEXT:
// one row per run, steps as [uid, step, next uid].
UNWIND $run_ids AS rid
MATCH (d:Decision {ns: $ns, run_id: rid})
USING INDEX SEEK d:Decision(ns, run_id)
OPTIONAL MATCH (d)-[:NEXT]->(n:Decision)
WITH rid, d, n ORDER BY d.step
RETURN rid AS run_id, collect([d.uid, d.step, n.uid]) AS steps
