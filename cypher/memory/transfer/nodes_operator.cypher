// mode: read
// Export page: Operator nodes of one namespace, in uid order, after $after.
MATCH (n:Operator)
USING INDEX n:Operator(uid)
WHERE n.uid STARTS WITH $prefix AND n.uid > $after
RETURN n.uid AS uid, properties(n) AS props
ORDER BY n.uid
LIMIT $limit
