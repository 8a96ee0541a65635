// Write decisions, their outcomes and kernels (stored once per content hash),
// with PRODUCED, IN_RUN and WROTE. MERGE on uid: replaying changes nothing.
UNWIND $rows AS row
MATCH (run:Run {uid: row.run_uid})
MERGE (d:Decision {uid: row.decision.uid})
  ON CREATE SET d += row.decision
MERGE (o:Outcome {uid: row.outcome.uid})
  ON CREATE SET o += row.outcome
MERGE (d)-[:PRODUCED]->(o)
MERGE (d)-[:IN_RUN]->(run)
WITH row, d
CALL (row, d) {
  WITH row, d WHERE row.kernel IS NOT NULL
  MERGE (k:Kernel {uid: row.kernel.uid})
    ON CREATE SET k += row.kernel
  MERGE (d)-[:WROTE]->(k)
}
RETURN count(*) AS written
