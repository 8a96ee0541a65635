// mode: read
// A page of a namespace's runs (uid order, after $after) with what their caption is derived from.
MATCH (run:Run)
USING INDEX run:Run(uid)
WHERE run.uid STARTS WITH $prefix AND run.uid > $after
RETURN run.uid AS uid, run.operator AS operator, run.started_at AS started_at
ORDER BY uid
LIMIT $limit
