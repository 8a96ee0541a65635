// mode: read
// title: Where a rule came from
// text: Each rule is linked (DERIVED_FROM) to the failed outcomes it was distilled from, and those to the decisions that produced them.
MATCH path = (i:Insight)-[:DERIVED_FROM]->(:Outcome)<-[:PRODUCED]-(:Decision)
WHERE i.ns = $ns AND i.kind = 'rule'
RETURN path
LIMIT 100
