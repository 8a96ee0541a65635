// mode: read
// Validity rules and patterns that apply: same family, same hardware class
// (any class when the query has none); rules about the latest error kind first,
// then rules before patterns, more support first.
MATCH (i:Insight)
WHERE i.ns = $ns AND i.family = $family AND ($hw_class IS NULL OR i.hw_class = $hw_class) AND i.active
RETURN i.id AS id, i.kind AS kind, i.family AS family, i.hw_class AS hw_class, i.text AS text,
       i.support AS support, i.confidence AS confidence, i.active AS active,
       i.error_kind AS error_kind, i.layer AS layer
ORDER BY CASE WHEN i.error_kind = $error_kind THEN 0 ELSE 1 END,
         CASE i.kind WHEN 'rule' THEN 0 ELSE 1 END, i.support DESC, i.confidence DESC, i.id
LIMIT $limit
