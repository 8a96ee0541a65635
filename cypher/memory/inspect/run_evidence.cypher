// mode: read
// For each decision of a run: how much evidence its prompt used, per tier.
MATCH (d:Decision {ns: $ns, run_id: $run_id})
USING INDEX SEEK d:Decision(ns, run_id)
OPTIONAL MATCH (d)-[u:USED]->()
RETURN d.id AS id, count(u) AS used, sum(coalesce(u.tokens, 0)) AS used_tokens
ORDER BY id
