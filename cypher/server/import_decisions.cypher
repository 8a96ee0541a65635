// Decisions a server import just created: the run facts retrieval filters on are copied from the run
// they are IN_RUN of (as the write path does), never taken from the file. Confined to the namespace.
UNWIND $uids AS u
MATCH (d:Decision {uid: u})-[:IN_RUN]->(run:Run)
WHERE d.ns = $ns AND run.ns = $ns
SET d.run_id = run.id, d.operator = run.operator, d.family = run.family, d.target = run.target,
    d.hw_id = run.hw_id, d.hw_class = run.hw_class, d.vendor = run.vendor
RETURN count(d) AS stamped
