// mode: read
// Per operator: runs, attempts, correct attempts and the best speedup found.
MATCH (d:Decision)
WHERE d.ns = $ns
RETURN d.operator AS operator, d.family AS family, count(DISTINCT d.run_id) AS runs, count(*) AS attempts,
       count(CASE WHEN d.status = 'correct' THEN 1 END) AS correct,
       max(CASE WHEN d.status = 'correct' THEN d.a END) AS best_speedup
ORDER BY operator
