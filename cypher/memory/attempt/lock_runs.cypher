// Lock the runs being written to (a property write takes the node's write lock
// until commit; it is removed again by attempt/advance_runs or refresh_runs) and
// return what the new decisions copy from them, with the run's last step and the
// decisions at that step (one index seek: kope_decision_run_step), where the
// NEXT chain continues when the run grows at its end.
UNWIND $run_uids AS ru
MATCH (run:Run {uid: ru})
SET run._lock = true
WITH run
CALL (run) {
  OPTIONAL MATCH (tail:Decision {ns: $ns, run_id: run.id, step: run.last_step})
  RETURN collect(tail.uid) AS tails
}
RETURN run.uid AS uid, run.id AS id, run.operator AS operator, run.family AS family,
       run.target AS target, run.hw_id AS hw_id, run.hw_class AS hw_class, run.vendor AS vendor,
       run.incumbent_id AS incumbent_id, run.last_step AS last_step, tails
