// Delete runs with their decisions and outcomes (DETACH: no edge is left dangling).
UNWIND $run_ids AS rid
MATCH (run:Run {uid: $ns + '/' + rid})
OPTIONAL MATCH (d:Decision)-[:IN_RUN]->(run)
OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
WITH run, collect(d) + collect(o) AS members
FOREACH (m IN members | DETACH DELETE m)
DETACH DELETE run
RETURN count(run) AS runs
