// mode: read
// title: All branches from one decision
// text: Every attempt that started from one decision's state, as outcomes coloured by how each went: the alternatives tried from there (FROM points at the state they started from). By default the decision with the most branches; set <code>decision</code> to a decision's <code>id</code> for another.
// param: ns
// param: decision => null
CALL () {
  MATCH (p:Decision)
  WHERE p.ns = $ns
  WITH p, COUNT { (p)<-[:FROM]-(:Decision) } AS branches
  ORDER BY branches DESC, p.id
  LIMIT 1
  RETURN p.id AS most_branched
}
MATCH (:Decision {uid: $ns + '/' + coalesce($decision, most_branched)})-[:PRODUCED]->(p:Outcome)
MATCH path = (p)<-[:FROM]-(:Outcome)
RETURN path
