// mode: read
// Effect insights of the family (kope/memory/effects.py): per-technique speedups
// with their 95% intervals. Speed evidence is weighted by hardware similarity:
// the query's hardware class first, then its shape class, then the largest
// effects (furthest from 1x either way), more support, id.
MATCH (i:Insight)
WHERE i.ns = $ns AND i.family = $family AND i.active AND i.kind = 'effect'
RETURN i.id AS id, i.kind AS kind, i.family AS family, i.hw_class AS hw_class, i.text AS text,
       i.support AS support, i.confidence AS confidence, i.active AS active,
       i.shape_class AS shape_class, i.template AS template, i.knob AS knob, i.value AS value,
       i.baseline AS baseline, i.effect AS effect, i.low AS low, i.high AS high
ORDER BY CASE WHEN i.hw_class = $hw_class THEN 0 ELSE 1 END,
         CASE WHEN i.shape_class = $shape_class THEN 0 ELSE 1 END,
         abs(log(i.effect)) DESC, i.support DESC, i.id
LIMIT $limit
