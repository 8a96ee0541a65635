// mode: read
// title: Time order versus lineage in the latest run
// text: NEXT (thin grey) follows the order attempts were made; FROM (thick orange) the state each one started from. Where they differ, the loop backtracked to an earlier, more promising state.
MATCH (r:Run)
WHERE r.ns = $ns
WITH r ORDER BY r.started_at DESC, r.id
LIMIT 1
MATCH path = (a:Decision {ns: $ns, run_id: r.id})-[:NEXT|FROM]->(:Decision)
RETURN path
