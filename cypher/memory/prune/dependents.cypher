// mode: read
// Runs outside the selection whose decisions started from decisions inside it
// (pruning the selection alone would cut their lineage).
UNWIND $run_ids AS rid
MATCH (d:Decision {ns: $ns, run_id: rid})<-[:FROM]-(c:Decision)
USING INDEX SEEK d:Decision(ns, run_id)
WHERE NOT c.run_id IN $run_ids
RETURN DISTINCT c.run_id AS run_id
ORDER BY run_id
