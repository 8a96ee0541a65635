// mode: read
// Export page: Insight nodes of one namespace, in uid order, after $after.
MATCH (n:Insight)
USING INDEX n:Insight(uid)
WHERE n.uid STARTS WITH $prefix AND n.uid > $after
RETURN n.uid AS uid, properties(n) AS props
ORDER BY n.uid
LIMIT $limit
