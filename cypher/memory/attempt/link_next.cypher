// Chronological order inside a run: [earlier uid, later uid] pairs.
UNWIND $pairs AS pair
MATCH (a:Decision {uid: pair[0]}), (b:Decision {uid: pair[1]})
MERGE (a)-[:NEXT]->(b)
RETURN count(*) AS linked
