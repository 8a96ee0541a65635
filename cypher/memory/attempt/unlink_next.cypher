// Remove NEXT edges that an out-of-order insert made stale.
UNWIND $pairs AS pair
MATCH (a:Decision {uid: pair[0]})-[n:NEXT]->(b:Decision {uid: pair[1]})
DELETE n
RETURN count(*) AS unlinked
