// Write insights and re-link them: DERIVED_FROM the outcomes they came from,
// ABOUT the operators and hardware involved (old links are replaced).
UNWIND $rows AS row
MERGE (i:Insight {uid: row.props.uid})
SET i += row.props
WITH i, row
CALL (i) {
  OPTIONAL MATCH (i)-[old:DERIVED_FROM|ABOUT]->()
  DELETE old
}
CALL (i, row) {
  UNWIND row.outcomes AS ou
  MATCH (o:Outcome {uid: ou})
  MERGE (i)-[:DERIVED_FROM]->(o)
}
CALL (i, row) {
  UNWIND row.operators AS opu
  MATCH (op:Operator {uid: opu})
  MERGE (i)-[:ABOUT]->(op)
}
CALL (i, row) {
  UNWIND row.hardware AS hu
  MATCH (hw:Hardware {uid: hu})
  MERGE (i)-[:ABOUT]->(hw)
}
RETURN count(i) AS written
