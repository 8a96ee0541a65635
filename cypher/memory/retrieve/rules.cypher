// mode: read
// Validity rules and patterns that apply to the family. Feasibility evidence
// transfers across hardware at full weight: rules from every hardware class.
// Patterns are speed evidence: only those of the query's hardware class (any
// class when the query has none). Rules about the latest error kind first, then
// rules before patterns, more support first.
MATCH (i:Insight)
WHERE i.ns = $ns AND i.family = $family AND i.active AND i.kind IN ['rule', 'pattern']
  AND (i.kind = 'rule' OR $hw_class IS NULL OR i.hw_class = $hw_class)
RETURN i.id AS id, i.kind AS kind, i.family AS family, i.hw_class AS hw_class, i.text AS text,
       i.support AS support, i.confidence AS confidence, i.active AS active,
       i.error_kind AS error_kind, i.layer AS layer
ORDER BY CASE WHEN i.error_kind = $error_kind THEN 0 ELSE 1 END,
         CASE i.kind WHEN 'rule' THEN 0 ELSE 1 END, i.support DESC, i.confidence DESC, i.id
LIMIT $limit
