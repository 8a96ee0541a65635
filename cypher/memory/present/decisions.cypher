// What a person reads on a decision and its outcome (kope/memory/present.py
// derives the values), on both nodes: the outcome-class label (exactly one of
// :Effective :Partial :Ineffective :Negative :Failed), :Root, :Backtrack and
// the caption; on the outcome its per-case display columns and a FROM edge to
// the parent's outcome (the decision lineage mirrored, so that Browser can
// draw a lineage of outcomes with no NEXT or USED edges between them); on both
// the creation time as a Neo4j datetime. Rows are {uid, class, root,
// backtrack, caption, case_names, case_results, case_speedups}. Idempotent.
UNWIND $rows AS row
MATCH (d:Decision {uid: row.uid})-[:PRODUCED]->(o:Outcome)
REMOVE d:Effective:Partial:Ineffective:Negative:Failed, o:Effective:Partial:Ineffective:Negative:Failed
FOREACH (_ IN CASE WHEN row.class = 'effective' THEN [1] ELSE [] END | SET d:Effective, o:Effective)
FOREACH (_ IN CASE WHEN row.class = 'partial' THEN [1] ELSE [] END | SET d:Partial, o:Partial)
FOREACH (_ IN CASE WHEN row.class = 'ineffective' THEN [1] ELSE [] END | SET d:Ineffective, o:Ineffective)
FOREACH (_ IN CASE WHEN row.class = 'negative' THEN [1] ELSE [] END | SET d:Negative, o:Negative)
FOREACH (_ IN CASE WHEN row.class = 'failed' THEN [1] ELSE [] END | SET d:Failed, o:Failed)
FOREACH (_ IN CASE WHEN row.root THEN [1] ELSE [] END | SET d:Root, o:Root)
FOREACH (_ IN CASE WHEN row.root THEN [] ELSE [1] END | REMOVE d:Root, o:Root)
FOREACH (_ IN CASE WHEN row.backtrack THEN [1] ELSE [] END | SET d:Backtrack, o:Backtrack)
FOREACH (_ IN CASE WHEN row.backtrack THEN [] ELSE [1] END | REMOVE d:Backtrack, o:Backtrack)
SET d.caption = row.caption, o.caption = row.caption,
    o.case_names = row.case_names, o.case_results = row.case_results, o.case_speedups = row.case_speedups,
    d.created = datetime({epochMillis: toInteger(round(d.created_at * 1000))}), o.created = d.created
WITH d, o
CALL (d, o) {
  MATCH (d)-[:FROM]->(:Decision)-[:PRODUCED]->(po:Outcome)
  MERGE (o)-[:FROM]->(po)
}
RETURN count(*) AS presented
