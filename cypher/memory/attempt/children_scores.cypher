// For each decision whose d(v) must be recomputed: its r and its children's d.
UNWIND $uids AS u
MATCH (a:Decision {uid: u})
OPTIONAL MATCH (c:Decision)-[:FROM]->(a)
RETURN u AS uid, a.r AS r, collect(CASE WHEN c IS NULL THEN NULL ELSE [c.uid, c.d] END) AS children
