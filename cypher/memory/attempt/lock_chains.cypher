// Lock every ancestor of the parents (the nodes whose d(v) this write changes)
// BEFORE their children are read, so concurrent writers to one lineage are
// serialised and no update of d(v) is lost. Removed again by attempt/set_scores.
UNWIND $parent_uids AS pu
MATCH (p:Decision {uid: pu})
MATCH (p)-[:FROM*0..]->(a:Decision)
WITH DISTINCT a
SET a._lock = true
RETURN a.uid AS uid
