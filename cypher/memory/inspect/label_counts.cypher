// mode: read
// Nodes per label in one namespace.
CALL () {
  MATCH (n:Operator) WHERE n.ns = $ns RETURN 'Operator' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Hardware) WHERE n.ns = $ns RETURN 'Hardware' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Task) WHERE n.ns = $ns RETURN 'Task' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Run) WHERE n.ns = $ns RETURN 'Run' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Kernel) WHERE n.ns = $ns RETURN 'Kernel' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Decision) WHERE n.ns = $ns RETURN 'Decision' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Outcome) WHERE n.ns = $ns RETURN 'Outcome' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Knowledge) WHERE n.ns = $ns RETURN 'Knowledge' AS label, count(n) AS n
  UNION ALL
  MATCH (n:Insight) WHERE n.ns = $ns RETURN 'Insight' AS label, count(n) AS n
}
RETURN label, n
