// mode: read
// title: Per-case speedups
// text: One attempt's result on every case (shape and dtype variant) of its task: passed or why not, and the speedup over PyTorch with the two median times. The attempt's speedup is the geometric mean over the passing cases. A run's best kernel was also timed <b>as deployed</b> after the run (its <code>best.py</code> in a plain process under the user's own settings): its speedups read <code>2.00× · deployed 0.50×</code>, and the Outcome holds <code>deployed_speedup</code> and <code>deployed_error</code>. By default the fastest correct decision; set <code>decision</code> for another.
// param: ns
// param: decision => null
CALL () {
  MATCH (d:Decision)
  WHERE d.ns = $ns AND d.status = 'correct'
  RETURN d.id AS fastest
  ORDER BY coalesce(d.a, -1.0) DESC, d.id
  LIMIT 1
}
MATCH (d:Decision {uid: $ns + '/' + coalesce($decision, fastest)})-[:PRODUCED]->(o:Outcome)
UNWIND range(0, size(coalesce(o.case_names, [])) - 1) AS i
RETURN d.caption AS decision, o.case_names[i] AS case, o.case_results[i] AS result, o.case_speedups[i] AS speedup
ORDER BY i
