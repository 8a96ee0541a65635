// Lock the runs being written to (a property write takes the node's write lock
// until commit; it is removed again by attempt/refresh_runs) and return what
// the new decisions copy from them.
UNWIND $run_uids AS ru
MATCH (run:Run {uid: ru})
SET run._lock = true
RETURN run.uid AS uid, run.id AS id, run.operator AS operator, run.family AS family,
       run.target AS target, run.hw_id AS hw_id, run.hw_class AS hw_class, run.vendor AS vendor,
       run.incumbent_id AS incumbent_id, run.last_step AS last_step
