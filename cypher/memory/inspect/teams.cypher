// mode: read
// Runs per team (provenance inside a shared namespace).
MATCH (r:Run)
WHERE r.ns = $ns
RETURN r.team AS team, count(*) AS runs
ORDER BY team
