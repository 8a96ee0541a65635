// Kernel captions (template and short hash, from kope/memory/present.py).
// Rows are {uid, caption}. Idempotent.
UNWIND $rows AS row
MATCH (k:Kernel {uid: row.uid})
SET k.caption = row.caption
RETURN count(*) AS presented
