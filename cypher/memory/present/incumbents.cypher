// :Incumbent on exactly the decisions (and their outcomes) a run points at
// with INCUMBENT (always one of its own decisions): for each of these runs,
// the label leaves the decisions that are no longer its incumbent and is set
// on the one that is. Run in the transaction that moves the INCUMBENT edge,
// and after imports.
UNWIND $run_uids AS ru
MATCH (run:Run {uid: ru})
CALL (run) {
  MATCH (d:Decision:Incumbent)-[:IN_RUN]->(run)
  WHERE NOT (run)-[:INCUMBENT]->(d)
  OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
  REMOVE d:Incumbent, o:Incumbent
}
CALL (run) {
  MATCH (run)-[:INCUMBENT]->(d:Decision)
  OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
  SET d:Incumbent, o:Incumbent
}
RETURN count(*) AS presented
