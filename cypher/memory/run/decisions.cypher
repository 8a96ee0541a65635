// mode: read
// The decisions of one run in step order (what resume and `kope memory show` read).
MATCH (d:Decision {ns: $ns, run_id: $run_id})
USING INDEX SEEK d:Decision(ns, run_id)
RETURN d.id AS id, d.run_id AS run_id, d.step AS step, d.title AS title, d.layer AS layer,
       d.thought AS thought, d.parent_id AS parent_id, d.code_hash AS code_hash, d.status AS status,
       d.label AS label, d.a AS a, d.r AS r, d.d AS d, d.conf AS conf, d.error_kind AS error_kind,
       d.operator AS operator, d.family AS family, d.target AS target, d.hw_id AS hw_id,
       d.hw_class AS hw_class, d.vendor AS vendor, d.created_at AS created_at,
       d.prompt_tokens AS prompt_tokens, d.completion_tokens AS completion_tokens, d.params_json AS params_json
ORDER BY d.step
