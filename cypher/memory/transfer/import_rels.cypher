// Import relationships between nodes already imported: MERGE, then set the
// exported properties. A row whose endpoints are missing links nothing; the
// caller compares the count with the rows it sent. Keys (TYPE:From:To) come
// from an allow-list checked in kope/memory/transfer.py.
UNWIND $rows AS row
CALL (row) {
  WITH row WHERE row.key = 'FOR_TASK:Run:Task'
  MATCH (a:Run {uid: row.from}), (b:Task {uid: row.to})
  MERGE (a)-[r:FOR_TASK]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'ON_HARDWARE:Run:Hardware'
  MATCH (a:Run {uid: row.from}), (b:Hardware {uid: row.to})
  MERGE (a)-[r:ON_HARDWARE]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'INCUMBENT:Run:Decision'
  MATCH (a:Run {uid: row.from}), (b:Decision {uid: row.to})
  MERGE (a)-[r:INCUMBENT]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'OF_OPERATOR:Task:Operator'
  MATCH (a:Task {uid: row.from}), (b:Operator {uid: row.to})
  MERGE (a)-[r:OF_OPERATOR]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'IN_RUN:Decision:Run'
  MATCH (a:Decision {uid: row.from}), (b:Run {uid: row.to})
  MERGE (a)-[r:IN_RUN]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'PRODUCED:Decision:Outcome'
  MATCH (a:Decision {uid: row.from}), (b:Outcome {uid: row.to})
  MERGE (a)-[r:PRODUCED]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'WROTE:Decision:Kernel'
  MATCH (a:Decision {uid: row.from}), (b:Kernel {uid: row.to})
  MERGE (a)-[r:WROTE]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'FROM:Decision:Decision'
  MATCH (a:Decision {uid: row.from}), (b:Decision {uid: row.to})
  MERGE (a)-[r:FROM]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'NEXT:Decision:Decision'
  MATCH (a:Decision {uid: row.from}), (b:Decision {uid: row.to})
  MERGE (a)-[r:NEXT]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'USED:Decision:Decision'
  MATCH (a:Decision {uid: row.from}), (b:Decision {uid: row.to})
  MERGE (a)-[r:USED]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'USED:Decision:Insight'
  MATCH (a:Decision {uid: row.from}), (b:Insight {uid: row.to})
  MERGE (a)-[r:USED]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'USED:Decision:Knowledge'
  MATCH (a:Decision {uid: row.from}), (b:Knowledge {uid: row.to})
  MERGE (a)-[r:USED]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'DERIVED_FROM:Insight:Outcome'
  MATCH (a:Insight {uid: row.from}), (b:Outcome {uid: row.to})
  MERGE (a)-[r:DERIVED_FROM]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'ABOUT:Insight:Operator'
  MATCH (a:Insight {uid: row.from}), (b:Operator {uid: row.to})
  MERGE (a)-[r:ABOUT]->(b)
  SET r += row.props
  RETURN 1 AS linked
  UNION ALL
  WITH row WHERE row.key = 'ABOUT:Insight:Hardware'
  MATCH (a:Insight {uid: row.from}), (b:Hardware {uid: row.to})
  MERGE (a)-[r:ABOUT]->(b)
  SET r += row.props
  RETURN 1 AS linked
}
RETURN count(linked) AS linked
