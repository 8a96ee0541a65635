// Evidence that was in the prompt: (Decision)-[:USED {tier, rank, tokens}]->(Insight).
UNWIND $rows AS row
MATCH (d:Decision {uid: row.from})
MATCH (t:Insight {uid: row.to})
MERGE (d)-[u:USED]->(t)
SET u.tier = row.tier, u.rank = row.rank, u.tokens = row.tokens
RETURN row.to AS linked
