// The outcome a decision produced, locked for the as-deployed write that
// follows in the same transaction (kope/memory/deployed.py): its per-case
// results, which the write adds each case's as-deployed speedup to, and the
// run the decision belongs to (checked against the measurement's).
MATCH (d:Decision {uid: $uid})-[:PRODUCED]->(o:Outcome)
SET o._lock = true
REMOVE o._lock
RETURN o.cases_json AS cases_json, d.run_id AS run_id
