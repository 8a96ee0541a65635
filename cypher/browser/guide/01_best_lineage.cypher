// mode: read
// title: Best lineage per operator
// text: For each operator, the fastest correct attempt ever recorded and the chain of decisions that led to it, back to its root (the first attempt of that line). Click a Decision to read its title, thought, step ratio <code>r</code>, label and downstream score <code>d</code>.
MATCH (best:Decision)
WHERE best.ns = $ns AND best.status = 'correct'
WITH best ORDER BY best.a DESC, best.id
WITH best.operator AS operator, head(collect(best)) AS best
MATCH path = (best)-[:FROM*0..]->(root:Decision)
WHERE NOT (root)-[:FROM]->()
RETURN path
