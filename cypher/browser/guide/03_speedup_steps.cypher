// mode: read
// title: Speedup over the steps of a run
// text: Each step of one run with its speedup over PyTorch (a bar of ▮, one per 0.125×) and the best correct speedup so far. By default the latest run; set <code>run</code> to a run's <code>id</code> for another.
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
WITH d ORDER BY d.step
WITH collect(d) AS steps
UNWIND range(0, size(steps) - 1) AS i
WITH steps[i] AS d,
     reduce(best = null, x IN steps[0..i + 1] |
       CASE WHEN x.status = 'correct' AND x.a IS NOT NULL AND (best IS NULL OR x.a > best) THEN x.a ELSE best END) AS best
RETURN d.step AS step, d.caption AS decision,
       [l IN labels(d) WHERE l IN ['Effective', 'Partial', 'Ineffective', 'Negative', 'Failed']][0] AS class,
       round(d.a, 2) AS speedup,
       reduce(bar = '', _ IN range(1, toInteger(round(8 * CASE WHEN coalesce(d.a, 0.0) > 6 THEN 6 ELSE coalesce(d.a, 0.0) END))) | bar + '▮') AS bar,
       round(best, 2) AS best_so_far
ORDER BY step
