// mode: read
// Every decision of the namespace with the fields the ranking reads: the input
// of ranking.rank_naively (the benchmark's naive baseline and the tests' reference).
MATCH (d:Decision)
USING INDEX SEEK d:Decision(ns)
WHERE d.ns = $ns
RETURN d.id AS id, d.parent_id AS parent_id, d.operator AS operator, d.family AS family,
       d.hw_id AS hw_id, d.hw_class AS hw_class, d.vendor AS vendor, d.layer AS layer,
       d.error_kind AS error_kind, d.label AS label, d.d AS d, d.conf AS conf,
       d.shape_sig AS shape_sig, d.shape_class AS shape_class, d.team AS team
