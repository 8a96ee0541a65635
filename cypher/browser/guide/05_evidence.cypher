// mode: read
// title: What evidence a decision used
// text: The latest decision whose prompt carried experience: its USED edges (caption: the context tier) point at the decisions, rules and knowledge documents that were in the prompt.
MATCH (d:Decision)
WHERE d.ns = $ns AND EXISTS { (d)-[:USED]->() }
WITH d ORDER BY d.created_at DESC, d.id
LIMIT 1
MATCH path = (d)-[:USED]->()
RETURN path
