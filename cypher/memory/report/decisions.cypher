// mode: read
// The lineage page: every decision of a namespace (or of one operator) with
// its outcome, its class label, whether it is an incumbent or a backtrack, and
// whether its outcome was replayed from a recorded space rather than measured,
// and the as-deployed figures of a run's best kernel (absent on the others).
MATCH (d:Decision)
WHERE d.ns = $ns AND ($operator IS NULL OR d.operator = $operator)
OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
RETURN d.id AS id, d.run_id AS run_id, d.operator AS operator, d.family AS family, d.step AS step,
       d.parent_id AS parent_id, d.title AS title, d.caption AS caption, d.layer AS layer,
       d.thought AS thought, d.status AS status, d.a AS a, d.r AS r, d.d AS d, d.diff AS diff,
       d.error_kind AS error_kind, [l IN labels(d) WHERE l IN $classes][0] AS class,
       d:Incumbent AS incumbent, d:Backtrack AS backtrack, o.cases_json AS cases_json,
       o.error_excerpt AS error_excerpt, o.cases_passed AS cases_passed, o.cases_total AS cases_total,
       coalesce(o.replayed, false) AS replayed, o.deployed_speedup AS deployed_speedup,
       o.deployed_error AS deployed_error, o.deployed_at AS deployed_at
ORDER BY operator, run_id, step
