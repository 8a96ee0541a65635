// mode: read
// Related templates (kope/memory/tuning.py): when the tuning sample holds no attempt
// of $template from another run, the attempts of the other templates of $family,
// from other runs, at most $limit, ranked as tuning_records.cypher ranks a
// template's attempts (hardware, then shapes, then newest, then id). Each row
// names its template: the tuner reads it through the knobs the templates share.
MATCH (d:Decision)
USING INDEX SEEK d:Decision(ns, family)
WHERE d.ns = $ns AND d.family = $family AND d.template IS NOT NULL AND d.template <> $template
  AND d.run_id <> $run_id
WITH d,
     0 AS own,
     0 AS same_operator,
     CASE WHEN d.hw_id = $hardware_id THEN 3 WHEN d.hw_class = $hardware_class THEN 2
          WHEN d.vendor = $vendor THEN 1 ELSE 0 END AS hardware,
     CASE WHEN d.shape_sig = $shape_sig THEN 2 WHEN d.shape_class = $shape_class THEN 1 ELSE 0 END AS shape
ORDER BY hardware DESC, shape DESC, d.created_at DESC, d.id ASC
LIMIT $limit
MATCH (d)-[:PRODUCED]->(o:Outcome)
RETURN d.id AS id, d.run_id AS run_id, d.step AS step, d.operator AS operator, d.family AS family,
       d.hw_id AS hw_id, d.hw_class AS hw_class, d.vendor AS vendor, d.params_json AS params_json,
       d.status AS status, d.error_kind AS error_kind, d.a AS a, d.code_hash AS code_hash,
       d.shape_class AS shape_class, o.cases_json AS cases_json, d.template AS template,
       own, same_operator, hardware, shape
ORDER BY hardware DESC, shape DESC, d.created_at DESC, d.id ASC
