// After a prune: delete kernels nobody wrote, tasks without runs, and
// operators and hardware nothing refers to any more.
CALL () {
  MATCH (k:Kernel) WHERE k.ns = $ns AND NOT EXISTS { ()-[:WROTE]->(k) }
  DETACH DELETE k
  RETURN count(*) AS kernels
}
CALL () {
  MATCH (t:Task) WHERE t.ns = $ns AND NOT EXISTS { ()-[:FOR_TASK]->(t) }
  DETACH DELETE t
  RETURN count(*) AS tasks
}
CALL () {
  MATCH (o:Operator) WHERE o.ns = $ns AND NOT EXISTS { ()-->(o) }
  DETACH DELETE o
  RETURN count(*) AS operators
}
CALL () {
  MATCH (h:Hardware) WHERE h.ns = $ns AND NOT EXISTS { ()-->(h) }
  DETACH DELETE h
  RETURN count(*) AS hardware
}
RETURN kernels, tasks, operators, hardware
