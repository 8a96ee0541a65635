// The as-deployed figures of a run's best kernel on the outcome of the
// decision that produced it (kope/memory/deployed.py): the geometric mean
// (deployed_speedup), why it is missing or partial (deployed_error), when it
// was measured (deployed_at, epoch seconds: the journal's key to a replay) and
// the per-case results with each case's deployed_speedup (cases_json). A null
// removes the property: a later measurement replaces an earlier one. Idempotent.
MATCH (:Decision {uid: $uid})-[:PRODUCED]->(o:Outcome)
SET o.deployed_speedup = $speedup, o.deployed_error = $error, o.deployed_at = $measured_at,
    o.cases_json = $cases_json
RETURN o.id AS id
