// Delete up to $limit nodes (and their relationships); returns how many went.
// Used by tests to give each test a clean database, in batches so large
// graphs never need one huge transaction.
MATCH (n) WITH n LIMIT $limit
DETACH DELETE n
RETURN count(*) AS deleted
