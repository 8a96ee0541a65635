// Write decisions, their outcomes and kernels (stored once per content hash),
// with PRODUCED, IN_RUN and WROTE. MERGE on the decision's uid; only the
// transaction that created a decision (marked with its $nonce) writes the
// rest, so a concurrent duplicate of the same attempt adds nothing twice.
// The run's task and hardware facts are copied onto the decision here (the
// retrieval pool reads them without joins: the team weights the evidence), as are the
// fields the outcome shares.
UNWIND $rows AS row
MATCH (run:Run {uid: $ns + '/' + row.run_id})
MERGE (d:Decision {uid: $ns + '/' + row.decision.id})
  ON CREATE SET d += row.decision, d._created = $nonce
WITH row, run, d WHERE d._created = $nonce
REMOVE d._created
SET d.ns = $ns, d.run_id = run.id, d.operator = run.operator, d.family = run.family, d.target = run.target,
    d.hw_id = run.hw_id, d.hw_class = run.hw_class, d.vendor = run.vendor, d.team = run.team
CREATE (o:Outcome)
SET o = row.outcome, o.uid = d.uid, o.ns = $ns, o.id = d.id, o.status = d.status, o.r = d.r, o.label = d.label,
    o.error_kind = d.error_kind, o.confidence = d.conf, o.speedup_usable = d.a, o.created_at = d.created_at
CREATE (d)-[:PRODUCED]->(o)
CREATE (d)-[:IN_RUN]->(run)
WITH row, d
CALL (row, d) {
  WITH row, d WHERE row.kernel IS NOT NULL
  MERGE (k:Kernel {uid: $ns + '/' + d.code_hash})
    ON CREATE SET k += row.kernel, k.ns = $ns, k.id = d.code_hash
  CREATE (d)-[:WROTE]->(k)
}
RETURN collect(d.uid) AS created
