// Provenance of attempts the server just created (never of ones recorded before: a replay
// changes nothing): the team and key that wrote them, the harness version the client
// reported, and the server's time. Confined to the authorised namespace.
UNWIND $uids AS u
MATCH (d:Decision {uid: u})
WHERE d.ns = $ns AND d.key_id IS NULL
SET d.team = $team, d.key_id = $key_id, d.harness_version = $harness_version, d.recorded_at = $now
RETURN count(d) AS stamped
