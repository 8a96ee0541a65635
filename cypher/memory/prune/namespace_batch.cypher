// Delete up to $limit nodes of one namespace (prune --all), any label.
CALL () {
  MATCH (n:Operator) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Hardware) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Task) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Run) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Kernel) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Decision) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Outcome) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Knowledge) WHERE n.ns = $ns RETURN n LIMIT $limit
  UNION ALL
  MATCH (n:Insight) WHERE n.ns = $ns RETURN n LIMIT $limit
}
WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
