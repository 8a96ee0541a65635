// Insights in scope that the evidence no longer supports: unlinked and marked
// inactive; deleted outright unless a decision USED them (provenance is kept).
MATCH (i:Insight)
WHERE i.ns = $ns AND ($family IS NULL OR i.family = $family) AND NOT i.id IN $keep
CALL (i) {
  OPTIONAL MATCH (i)-[e:DERIVED_FROM|ABOUT]->()
  DELETE e
}
SET i.active = false, i.support = 0
WITH i WHERE NOT EXISTS { ()-[:USED]->(i) }
DETACH DELETE i
RETURN count(*) AS deleted
