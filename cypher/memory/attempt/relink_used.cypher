// Restore the USED edges of decisions recorded before (journal sync): each
// piece of evidence the attempt cited that is in the graph but not linked.
// Rows are {from: decision uid, items: [[kind, evidence id, tier, rank, tokens], ...]};
// returns, per decision, the evidence ("kind:id") that is not in the graph.
UNWIND $rows AS row
MATCH (d:Decision {uid: row.from})
UNWIND row.items AS item
OPTIONAL MATCH (td:Decision {uid: $ns + '/' + item[1]}) WHERE item[0] = 'decision'
OPTIONAL MATCH (ti:Insight {uid: $ns + '/' + item[1]}) WHERE item[0] = 'insight'
OPTIONAL MATCH (tk:Knowledge {uid: $ns + '/' + item[1]}) WHERE item[0] = 'knowledge'
WITH d, row, item, coalesce(td, ti, tk) AS t
CALL (d, t, item) {
  WITH d, t, item WHERE t IS NOT NULL AND NOT EXISTS { (d)-[:USED]->(t) }
  CREATE (d)-[:USED {tier: item[2], rank: item[3], tokens: item[4]}]->(t)
}
WITH row, collect(CASE WHEN t IS NULL THEN item[0] + ':' + item[1] END) AS missing
WHERE size(missing) > 0
RETURN row.from AS from, missing
