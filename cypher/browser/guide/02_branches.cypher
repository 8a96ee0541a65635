// mode: read
// title: All branches from one decision
// text: The decision with the most alternatives: every attempt that started from its state, with what each produced. Siblings are what the memory summarises as "what was tried from here and how it went".
MATCH (p:Decision)
WHERE p.ns = $ns
WITH p, COUNT { (p)<-[:FROM]-(:Decision) } AS branches
ORDER BY branches DESC, p.id
LIMIT 1
MATCH path = (p)<-[:FROM]-(:Decision)-[:PRODUCED]->(:Outcome)
RETURN path
