// mode: read
// title: Failure rules per hardware class
// text: Validity rules distilled from repeated failures: on this hardware class, kernels of this family failed this way this often. Retrieval hands the applicable ones to every prompt.
MATCH (i:Insight)
WHERE i.ns = $ns AND i.kind = 'rule'
OPTIONAL MATCH (i)-[:ABOUT]->(h:Hardware)
RETURN i.hw_class AS hardware_class, i.family AS family, i.error_kind AS error_kind,
       i.support AS support, round(i.confidence, 2) AS confidence, i.active AS active,
       collect(DISTINCT h.id) AS machines, i.text AS rule
ORDER BY hardware_class, support DESC, error_kind
