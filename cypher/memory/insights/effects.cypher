// mode: read
// Correct attempts with template settings: the raw material of effect insights
// (kope/memory/effects.py pairs those of one operator, case set and machine that
// differ in one knob). Ordered, so the same graph gives the same insights.
MATCH (d:Decision)-[:PRODUCED]->(o:Outcome)
WHERE d.ns = $ns AND ($family IS NULL OR d.family = $family) AND d.template IS NOT NULL
  AND d.status = 'correct' AND d.a > 0
RETURN d.id AS id, d.family AS family, d.hw_class AS hw_class, d.hw_id AS hw_id, d.operator AS operator,
       d.template AS template, d.shape_sig AS shape_sig, d.shape_class AS shape_class,
       d.params_json AS params_json, d.a AS a, o.uid AS outcome
ORDER BY family, hw_class, hw_id, operator, id
