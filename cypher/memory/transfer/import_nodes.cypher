// Import nodes: MERGE on uid, then set the exported properties (idempotent).
// The label comes from an allow-list checked in kope/memory/transfer.py.
UNWIND $rows AS row
CALL (row) {
  WITH row WHERE row.label = 'Operator'
  MERGE (n:Operator {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Hardware'
  MERGE (n:Hardware {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Task'
  MERGE (n:Task {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Run'
  MERGE (n:Run {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Kernel'
  MERGE (n:Kernel {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Decision'
  MERGE (n:Decision {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Outcome'
  MERGE (n:Outcome {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Knowledge'
  MERGE (n:Knowledge {uid: row.uid})
  SET n += row.props
}
CALL (row) {
  WITH row WHERE row.label = 'Insight'
  MERGE (n:Insight {uid: row.uid})
  SET n += row.props
}
RETURN count(*) AS written
