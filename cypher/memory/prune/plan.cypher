// mode: read
// What pruning these runs removes, and which surviving decisions lose children.
UNWIND $run_ids AS rid
MATCH (d:Decision {ns: $ns, run_id: rid})
USING INDEX SEEK d:Decision(ns, run_id)
OPTIONAL MATCH (d)-[:FROM]->(p:Decision) WHERE NOT p.run_id IN $run_ids
OPTIONAL MATCH (d)<-[u:USED]-(user:Decision) WHERE NOT user.run_id IN $run_ids
RETURN count(DISTINCT d) AS decisions, collect(DISTINCT p.uid) AS surviving_parents,
       count(DISTINCT u) AS foreign_used
