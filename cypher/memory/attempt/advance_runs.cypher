// The write path's run refresh when a transaction only added decisions: each
// run's totals and incumbent from its totals before ($rows: {uid, new: [uids of
// the decisions this transaction created]}), not from all its decisions.
// Incumbent rule as in attempt/refresh_runs (highest a, unknown speed lowest,
// earliest step among equals), applied to the former incumbent and the new
// correct decisions: equal to the full recomputation while the run's totals
// are. Where they are not (the run's IN_RUN count differs from its steps plus
// the new decisions, e.g. after an import into it) nothing is changed and
// `stale` is true: the caller runs attempt/refresh_runs for those runs.
// Releases the run lock like attempt/refresh_runs.
UNWIND $rows AS row
MATCH (run:Run {uid: row.uid})
OPTIONAL MATCH (run)-[:INCUMBENT]->(prev:Decision)
CALL (row) {
  UNWIND row.new AS du
  MATCH (d:Decision {uid: du})
  RETURN count(d) AS added, max(d.step) AS last_step,
         sum(coalesce(d.prompt_tokens, 0)) AS prompt_tokens,
         sum(coalesce(d.completion_tokens, 0)) AS completion_tokens
}
CALL (row, prev) {
  UNWIND row.new + CASE WHEN prev IS NULL THEN [] ELSE [prev.uid] END AS du
  MATCH (d:Decision {uid: du})
  WHERE d.status = 'correct'
  WITH d ORDER BY coalesce(d.a, -1.0) DESC, d.step ASC LIMIT 1
  RETURN collect(d) AS found
}
WITH run, prev, added, last_step, prompt_tokens, completion_tokens, found[0] AS best,
     coalesce(run.steps, 0) + added = COUNT { (run)<-[:IN_RUN]-() } AS consistent
CALL (run, prev, best, added, last_step, prompt_tokens, completion_tokens, consistent) {
  WITH * WHERE consistent
  SET run.steps = coalesce(run.steps, 0) + added,
      run.last_step = CASE WHEN run.last_step IS NULL OR last_step > run.last_step THEN last_step ELSE run.last_step END,
      run.prompt_tokens = coalesce(run.prompt_tokens, 0) + prompt_tokens,
      run.completion_tokens = coalesce(run.completion_tokens, 0) + completion_tokens,
      run.best_speedup = best.a, run.incumbent_id = best.id
  REMOVE run._lock
  WITH run, prev, best WHERE best IS NOT NULL AND (prev IS NULL OR prev.uid <> best.uid)
  OPTIONAL MATCH (run)-[old:INCUMBENT]->()
  DELETE old
  MERGE (run)-[:INCUMBENT]->(best)
}
RETURN run.uid AS uid, prev.id AS previous, best.id AS incumbent, NOT consistent AS stale
