// mode: read
// Export page: Decision nodes of one namespace, in uid order, after $after.
MATCH (n:Decision)
USING INDEX n:Decision(uid)
WHERE n.uid STARTS WITH $prefix AND n.uid > $after
RETURN n.uid AS uid, properties(n) AS props
ORDER BY n.uid
LIMIT $limit
