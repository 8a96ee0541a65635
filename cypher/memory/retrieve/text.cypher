// mode: read
// Full-text matches (index kope_text: decision titles and thoughts, outcome
// error excerpts) of the query's words, for the LLM path's warm tier: each
// matching outcome stands for its decision; best Lucene score first, then id.
// A team of weight 0 ($teams / $team_other, kope/memory/ranking.py) is left out.
CALL db.index.fulltext.queryNodes('kope_text', $text, {limit: $fetch}) YIELD node, score
WITH node, score WHERE node.ns = $ns
OPTIONAL MATCH (owner:Decision)-[:PRODUCED]->(node)
WITH coalesce(owner, node) AS d, score
WHERE d:Decision AND NOT d.id IN $exclude AND coalesce($teams[d.team], $team_other) > 0
WITH d, max(score) AS score
RETURN d.id AS id, d.parent_id AS parent_id, d.uid AS uid, score
ORDER BY score DESC, id
LIMIT $limit
