// Provenance of runs the server just created: the key that started them and the server's
// time (the team is written with the run, from the key). Confined to the authorised namespace.
UNWIND $uids AS u
MATCH (run:Run {uid: u})
WHERE run.ns = $ns AND run.key_id IS NULL
SET run.key_id = $key_id, run.harness_version = $harness_version, run.recorded_at = $now
RETURN count(run) AS stamped
