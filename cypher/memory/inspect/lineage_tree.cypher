// mode: read
// The lineage tree a decision belongs to: its root, the path from the
// decision up to the root, and up to $limit members of the tree (all
// descendants of the root, counted in full).
MATCH (d:Decision {uid: $uid})
MATCH path = (d)-[:FROM*0..]->(root:Decision)
WHERE NOT (root)-[:FROM]->()
CALL (root) {
  MATCH (x:Decision)-[:FROM*0..]->(root)
  RETURN count(x) AS total
}
CALL (root) {
  MATCH (x:Decision)-[:FROM*0..]->(root)
  WITH x ORDER BY x.run_id, x.step LIMIT $limit
  RETURN collect(x {.id, .run_id, .step, .title, .layer, .parent_id, .status, .label, .a, .r, .d, .error_kind}) AS members
}
RETURN root.id AS root, [n IN nodes(path) | n.id] AS path, total, members
