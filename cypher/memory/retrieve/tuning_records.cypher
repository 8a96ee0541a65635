// mode: read
// The cost model's training sample: attempts with settings of one kernel template
// (kope/memory/tuning.py), best evidence first, at most $limit. With $run_only,
// only the attempts of run $run_id (the --no-memory view). The order, each rule
// documented in kope/memory/tuning.py: this run's own attempts, then same operator,
// then hardware (same machine > class > vendor > other), then shapes (same case-set
// signature > same shape class > other), then newest first, then id.
MATCH (d:Decision)
USING INDEX SEEK d:Decision(ns, template)
WHERE d.ns = $ns AND d.template = $template AND (NOT $run_only OR d.run_id = $run_id)
WITH d,
     CASE WHEN d.run_id = $run_id THEN 1 ELSE 0 END AS own,
     CASE WHEN d.operator = $operator THEN 1 ELSE 0 END AS same_operator,
     CASE WHEN d.hw_id = $hardware_id THEN 3 WHEN d.hw_class = $hardware_class THEN 2
          WHEN d.vendor = $vendor THEN 1 ELSE 0 END AS hardware,
     CASE WHEN d.shape_sig = $shape_sig THEN 2 WHEN d.shape_class = $shape_class THEN 1 ELSE 0 END AS shape
ORDER BY own DESC, same_operator DESC, hardware DESC, shape DESC, d.created_at DESC, d.id ASC
LIMIT $limit
MATCH (d)-[:PRODUCED]->(o:Outcome)
RETURN d.id AS id, d.run_id AS run_id, d.step AS step, d.operator AS operator, d.family AS family,
       d.hw_id AS hw_id, d.hw_class AS hw_class, d.vendor AS vendor, d.params_json AS params_json,
       d.status AS status, d.error_kind AS error_kind, d.a AS a, d.code_hash AS code_hash,
       d.shape_class AS shape_class, o.cases_json AS cases_json,
       own, same_operator, hardware, shape
ORDER BY own DESC, same_operator DESC, hardware DESC, shape DESC, d.created_at DESC, d.id ASC
