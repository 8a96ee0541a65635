// Evidence that was in the prompt of decisions this transaction created:
// (Decision)-[:USED {tier, rank, tokens}]->(Decision). Rows are
// {from: decision uid, items: [[evidence id, tier, rank, tokens], ...]};
// returns, per decision, the evidence ids that are not in the graph.
UNWIND $rows AS row
MATCH (d:Decision {uid: row.from})
UNWIND row.items AS item
OPTIONAL MATCH (t:Decision {uid: $ns + '/' + item[0]})
FOREACH (_ IN CASE WHEN t IS NULL THEN [] ELSE [1] END |
  CREATE (d)-[:USED {tier: item[1], rank: item[2], tokens: item[3]}]->(t))
WITH row, collect(CASE WHEN t IS NULL THEN item[0] END) AS missing
WHERE size(missing) > 0
RETURN row.from AS from, missing
