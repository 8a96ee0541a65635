// mode: read
// title: Incumbents
// text: Each run points (INCUMBENT) at its best correct attempt so far.
MATCH path = (:Task)<-[:FOR_TASK]-(r:Run)-[:INCUMBENT]->(:Decision)
WHERE r.ns = $ns
RETURN path
