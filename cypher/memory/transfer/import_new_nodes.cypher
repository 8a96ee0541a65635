// The server's import: create the nodes whose uid is new, with the file's properties; a node that exists
// keeps every property it has (attempts are immutable). Returns the [label, uid] of the nodes created.
// The label comes from an allow-list checked in kope/memory/transfer.py.
UNWIND $rows AS row
CALL (row) {
  WITH row WHERE row.label = 'Operator'
  MERGE (n:Operator {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Hardware'
  MERGE (n:Hardware {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Task'
  MERGE (n:Task {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Run'
  MERGE (n:Run {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Kernel'
  MERGE (n:Kernel {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Decision'
  MERGE (n:Decision {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Outcome'
  MERGE (n:Outcome {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Knowledge'
  MERGE (n:Knowledge {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
  UNION ALL
  WITH row WHERE row.label = 'Insight'
  MERGE (n:Insight {uid: row.uid})
  ON CREATE SET n += row.props, n._created = $nonce
  RETURN n
}
WITH row, n WHERE n._created = $nonce
REMOVE n._created
RETURN collect([row.label, n.uid]) AS created
