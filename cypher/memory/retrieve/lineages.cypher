// mode: read
// For each hit: the decision and its outcome, its ancestor chain (nearest
// first, at most $max_chain kept, the full depth counted), and its sibling
// branches (other children of its parent: what was tried from the same state)
// ordered like the ranking's label buckets, at most $max_siblings listed, all counted.
UNWIND $uids AS u
MATCH (h:Decision {uid: u})-[:PRODUCED]->(o:Outcome)
CALL (h) {
  OPTIONAL MATCH path = (h)-[:FROM*1..]->(root:Decision)
  WHERE NOT (root)-[:FROM]->()
  RETURN CASE WHEN path IS NULL THEN [] ELSE nodes(path)[1..] END AS ancestors
}
CALL (h) {
  OPTIONAL MATCH (h)-[:FROM]->(:Decision)<-[:FROM]-(s:Decision)
  WHERE s <> h
  WITH s ORDER BY CASE s.label WHEN 'effective' THEN 0 WHEN 'partial' THEN 1 WHEN 'ineffective' THEN 2 ELSE 3 END,
                  s.d * s.conf DESC, s.id
  RETURN collect(s {.id, .step, .title, .layer, .status, .label, .a, .r, .d, .error_kind}) AS siblings
}
RETURN u AS uid,
       h {.id, .run_id, .step, .title, .thought, .layer, .parent_id, .status, .label, .a, .r, .d, .conf,
          .error_kind, .operator, .family, .target, .hw_id, .hw_class, .vendor, .diff, .code_hash, .params_json,
          .shape_sig, .shape_class, .team} AS hit,
       o {.cases_total, .cases_passed, .speedup, .error_excerpt, .timings_valid} AS outcome,
       size(ancestors) AS depth,
       [a IN ancestors[0..$max_chain] | a {.id, .step, .title, .layer, .status, .label, .a, .r, .d}] AS chain,
       size(siblings) AS sibling_total,
       siblings[0..$max_siblings] AS siblings,
       [l IN ['effective', 'partial', 'ineffective', 'negative'] | size([s IN siblings WHERE s.label = l])] AS sibling_counts
