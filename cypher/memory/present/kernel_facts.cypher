// mode: read
// A page of a namespace's kernels (uid order, after $after) with what their caption is derived from.
MATCH (k:Kernel)
USING INDEX k:Kernel(uid)
WHERE k.uid STARTS WITH $prefix AND k.uid > $after
RETURN k.uid AS uid, k.id AS id, k.template AS template
ORDER BY uid
LIMIT $limit
