// For each decision whose d(v) must be recomputed: its r and its children's
// [uid, d] (one row holding them all).
UNWIND $uids AS u
MATCH (a:Decision {uid: u})
CALL (a) {
  OPTIONAL MATCH (c:Decision)-[:FROM]->(a)
  RETURN collect(CASE WHEN c IS NULL THEN NULL ELSE [c.uid, c.d] END) AS children
}
RETURN collect([u, a.r, children]) AS nodes
