// mode: read
// title: Why this decision
// text: What the proposer saw and said: its thought, the state it started from with that state's feedback (outcome, error excerpt), and the evidence its prompt carried (tier, rank, tokens: the USED edges). By default the incumbent of the latest run; set <code>decision</code> for another.
// param: ns
// param: decision => null
CALL () {
  MATCH (r:Run)-[:INCUMBENT]->(d:Decision)
  WHERE r.ns = $ns
  RETURN d.id AS latest_best
  ORDER BY r.started_at DESC, r.id
  LIMIT 1
}
MATCH (d:Decision {uid: $ns + '/' + coalesce($decision, latest_best)})
OPTIONAL MATCH (d)-[:FROM]->(p:Decision)-[:PRODUCED]->(po:Outcome)
CALL (d) {
  OPTIONAL MATCH (d)-[u:USED]->(e)
  WITH u, e ORDER BY u.tier DESC, u.rank
  RETURN collect(CASE WHEN e IS NULL THEN NULL
                      ELSE u.tier + ' #' + toString(u.rank) + ' · ' + toString(u.tokens) + ' tokens · ' +
                           coalesce(e.caption, e.title, left(e.text, 80)) END) AS evidence
}
RETURN d.caption AS decision, d.layer AS layer, d.thought AS thought,
       CASE WHEN p IS NULL THEN 'none: a root' ELSE p.caption END AS started_from,
       CASE WHEN p IS NULL THEN null
            WHEN po.status = 'correct' THEN 'correct on ' + toString(po.cases_passed) + '/' + toString(po.cases_total) +
                 ' cases, ' + coalesce(toString(round(po.speedup_usable, 2)) + '× over PyTorch', 'speed not measured')
            ELSE po.status + ' on ' + toString(po.cases_total - po.cases_passed) + '/' + toString(po.cases_total) +
                 ' cases' + coalesce(': ' + left(po.error_excerpt, 300), '') END AS parent_feedback,
       evidence
