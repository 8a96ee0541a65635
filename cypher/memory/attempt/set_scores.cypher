// Store recomputed downstream scores ([uid, d] rows) and release the lineage locks.
UNWIND $rows AS row
MATCH (a:Decision {uid: row[0]})
SET a.d = row[1]
REMOVE a._lock
RETURN count(*) AS updated
