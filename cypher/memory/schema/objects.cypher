// mode: read
// KOPE's constraints and indexes that exist now (names start with kope_); a
// uniqueness constraint shows up through the index that backs it.
SHOW INDEXES YIELD name, owningConstraint, state
WHERE coalesce(owningConstraint, name) STARTS WITH 'kope_'
RETURN coalesce(owningConstraint, name) AS name,
       CASE WHEN owningConstraint IS NULL THEN 'index' ELSE 'constraint' END AS kind,
       state
ORDER BY kind, name
