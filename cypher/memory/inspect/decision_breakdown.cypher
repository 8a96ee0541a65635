// mode: read
// Decisions per status and label.
MATCH (d:Decision)
WHERE d.ns = $ns
RETURN d.status AS status, d.label AS label, count(*) AS n
ORDER BY status, label
