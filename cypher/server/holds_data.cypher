// mode: read
// Whether the graph holds any node under a namespace name (before a team's key may create that name:
// data the registry did not create, e.g. written over Bolt, is never handed to a team).
CALL () {
  MATCH (n:Operator) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Hardware) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Task) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Run) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Kernel) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Decision) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Outcome) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Knowledge) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
  UNION ALL
  MATCH (n:Insight) WHERE n.uid STARTS WITH $prefix RETURN n LIMIT 1
}
RETURN count(n) > 0 AS held
