// mode: read
// How many attempts each (family, hardware class, layer) has: the denominators
// of the insights' confidence.
MATCH (d:Decision)
WHERE d.ns = $ns AND ($family IS NULL OR d.family = $family)
RETURN d.family AS family, d.hw_class AS hw_class, d.layer AS layer, count(*) AS attempts
ORDER BY family, hw_class, layer
