// Start runs: MERGE the operator, hardware and task they belong to, then the
// run and its FOR_TASK / OF_OPERATOR / ON_HARDWARE edges. Idempotent.
UNWIND $rows AS row
MERGE (op:Operator {uid: row.operator.uid})
  ON CREATE SET op += row.operator
MERGE (hw:Hardware {uid: row.hardware.uid})
  ON CREATE SET hw += row.hardware
MERGE (task:Task {uid: row.task.uid})
  ON CREATE SET task += row.task
MERGE (task)-[:OF_OPERATOR]->(op)
MERGE (run:Run {uid: row.run.uid})
  ON CREATE SET run += row.run
MERGE (run)-[:FOR_TASK]->(task)
MERGE (run)-[:ON_HARDWARE]->(hw)
RETURN run.uid AS uid
