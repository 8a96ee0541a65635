// Restore the structural relationships of decisions recorded before (journal
// sync): IN_RUN, FROM, PRODUCED and WROTE, each only where its other end is in
// the graph and the relationship is not. Rows are {uid, run_id, parent_id}.
UNWIND $rows AS row
MATCH (d:Decision {uid: row.uid})
CALL (d, row) {
  MATCH (run:Run {uid: $ns + '/' + row.run_id})
  MERGE (d)-[:IN_RUN]->(run)
}
CALL (d, row) {
  WITH d, row WHERE row.parent_id IS NOT NULL
  MATCH (p:Decision {uid: $ns + '/' + row.parent_id})
  MERGE (d)-[:FROM]->(p)
}
CALL (d) {
  MATCH (o:Outcome {uid: d.uid})
  MERGE (d)-[:PRODUCED]->(o)
}
CALL (d) {
  WITH d WHERE d.code_hash IS NOT NULL
  MATCH (k:Kernel {uid: $ns + '/' + d.code_hash})
  MERGE (d)-[:WROTE]->(k)
}
RETURN count(d) AS relinked
