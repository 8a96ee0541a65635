// Store recomputed downstream scores and release the lineage locks.
UNWIND $rows AS row
MATCH (a:Decision {uid: row.uid})
SET a.d = row.d
REMOVE a._lock
RETURN count(*) AS updated
