// mode: read
// title: Effect estimates per technique
// text: What one knob value did to speed against another, from controlled comparisons (same operator, cases and machine, one knob different), per hardware class and shape class: the geometric-mean ratio with its 95% interval and how many comparisons support it. Prompts cite them by id; the outcomes each came from are its DERIVED_FROM edges.
// param: ns
MATCH (i:Insight)
WHERE i.ns = $ns AND i.kind = 'effect'
OPTIONAL MATCH (i)-[:DERIVED_FROM]->(o:Outcome)
RETURN i.id AS id, i.hw_class AS hardware_class, i.shape_class AS shape_class, i.template AS template,
       i.knob + '=' + i.value + ' vs ' + i.baseline AS technique, round(i.effect, 2) AS effect,
       round(i.low, 2) AS low, round(i.high, 2) AS high, i.support AS comparisons, count(o) AS outcomes, i.text AS text
ORDER BY hardware_class, shape_class, abs(log(effect)) DESC, id
