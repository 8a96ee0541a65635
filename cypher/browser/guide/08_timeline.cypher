// mode: read
// title: Time order versus lineage in a run
// text: The decisions of one run: NEXT (thin grey) follows the order they were made; FROM (bold orange) points at the state each one started from. They differ where an attempt started from the incumbent rather than from the attempt just before it (after a failed or slower attempt), and where the loop backtracked to an earlier, more promising state after several steps without improvement: those decisions carry the label <b>Backtrack</b> (purple ring). With <i>Connect result nodes</i> on, Browser also draws the light blue USED edges between these decisions (a prompt that cited an earlier attempt). By default the latest run; set <code>run</code> for another.
// param: ns
// param: run => null
CALL () {
  MATCH (r:Run)
  WHERE r.ns = $ns
  RETURN r.id AS latest
  ORDER BY r.started_at DESC, r.id
  LIMIT 1
}
MATCH (d:Decision {ns: $ns, run_id: coalesce($run, latest)})
MATCH path = (d)-[:NEXT|FROM]->(:Decision)
RETURN path
