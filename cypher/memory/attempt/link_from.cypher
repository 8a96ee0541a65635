// Lineage: the child started from the parent's state.
UNWIND $links AS link
MATCH (c:Decision {uid: link.child}), (p:Decision {uid: link.parent})
MERGE (c)-[:FROM]->(p)
RETURN count(*) AS linked
