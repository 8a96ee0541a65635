// Recompute each run's totals and its incumbent from its decisions, and
// release the run lock. Incumbent rule: the best correct attempt, highest a
// (unknown speed lowest), earliest step among equals; this is "replace only by
// a correct, strictly faster attempt" applied in step order.
UNWIND $run_uids AS ru
MATCH (run:Run {uid: ru})
OPTIONAL MATCH (run)-[:INCUMBENT]->(prev:Decision)
CALL (run) {
  MATCH (d:Decision)-[:IN_RUN]->(run)
  RETURN count(d) AS steps, max(d.step) AS last_step,
         sum(coalesce(d.prompt_tokens, 0)) AS prompt_tokens,
         sum(coalesce(d.completion_tokens, 0)) AS completion_tokens
}
CALL (run) {
  OPTIONAL MATCH (d:Decision)-[:IN_RUN]->(run) WHERE d.status = 'correct'
  WITH d ORDER BY coalesce(d.a, -1.0) DESC, d.step ASC LIMIT 1
  RETURN d AS best
}
SET run.steps = steps, run.last_step = last_step, run.prompt_tokens = prompt_tokens,
    run.completion_tokens = completion_tokens, run.best_speedup = best.a, run.incumbent_id = best.id
REMOVE run._lock
WITH run, prev, best
CALL (run, prev, best) {
  WITH run, prev, best WHERE best IS NOT NULL AND (prev IS NULL OR prev.uid <> best.uid)
  OPTIONAL MATCH (run)-[old:INCUMBENT]->()
  DELETE old
  MERGE (run)-[:INCUMBENT]->(best)
}
RETURN run.uid AS uid, prev.id AS previous, best.id AS incumbent
