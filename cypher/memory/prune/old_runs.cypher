// mode: read
// Runs of a namespace started before a time.
MATCH (r:Run)
WHERE r.ns = $ns AND r.started_at < $before
RETURN r.id AS id
ORDER BY id
