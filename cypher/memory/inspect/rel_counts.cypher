// mode: read
// Relationships per type in one namespace (every relationship starts at a
// Task, Run, Decision or Insight of the namespace).
CALL () {
  MATCH (a:Task)-[r]->() WHERE a.ns = $ns RETURN type(r) AS type
  UNION ALL
  MATCH (a:Run)-[r]->() WHERE a.ns = $ns RETURN type(r) AS type
  UNION ALL
  MATCH (a:Decision)-[r]->() WHERE a.ns = $ns RETURN type(r) AS type
  UNION ALL
  MATCH (a:Insight)-[r]->() WHERE a.ns = $ns RETURN type(r) AS type
}
RETURN type, count(*) AS n
ORDER BY type
