// Lineage: the child (created by this transaction) started from the parent's
// state. Rows are [child uid, parent uid].
UNWIND $links AS link
MATCH (c:Decision {uid: link[0]}), (p:Decision {uid: link[1]})
CREATE (c)-[:FROM]->(p)
RETURN count(*) AS linked
