// mode: read
// title: Best lineage per operator
// text: For each operator, its fastest correct attempt (ringed red: the incumbent of its run) and the chain of attempts it grew from, back to the root, which names the operator. Each caption reads the speedup over PyTorch first, then the step's ratio to its parent, the step and the change, e.g. <code>2.36× ↑1.69 · s3 unroll 2→1</code>; a run's best kernel, timed again as deployed after the run (its <code>best.py</code> in a plain process under the user's own settings: what a user gets), adds that figure, <code>2.36× ↑1.69 · deployed 0.93× · s3 unroll 2→1</code>, and its Outcome holds <code>deployed_speedup</code> and <code>deployed_error</code>; the colour is the class (the speedup over PyTorch). The nodes are the attempts' <b>Outcomes</b> (status, speedup, per-case results); double-click one to open its <b>Decision</b> (thought, <code>diff</code>, d(v) score <code>d</code>).
// text: Browser's setting <i>Connect result nodes</i> (on by default) draws every relationship between the nodes on screen, not only those a query returns. Between decisions that adds the NEXT (time order) and USED (cited as evidence) edges, which bury a lineage; between outcomes there are none, so this slide and the next draw the FROM chain of outcomes (the recorder mirrors each decision's FROM onto its outcome) and nothing else. Slides that draw decisions say what the setting adds.
// param: ns
MATCH (best:Decision)
WHERE best.ns = $ns AND best.status = 'correct'
WITH best ORDER BY coalesce(best.a, -1.0) DESC, best.step, best.id
WITH best.operator AS operator, head(collect(best)) AS best
MATCH (best)-[:PRODUCED]->(o:Outcome)
MATCH path = (o)-[:FROM*0..]->(root:Outcome)
WHERE NOT (root)-[:FROM]->()
RETURN path
