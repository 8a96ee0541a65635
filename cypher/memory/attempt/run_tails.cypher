// The last decision of each run before this write: rows are [run id, the run's
// last_step]; one index seek per run (kope_decision_run_step).
UNWIND $tails AS tail
MATCH (d:Decision {ns: $ns, run_id: tail[0], step: tail[1]})
RETURN tail[0] AS run_id, d.uid AS uid
