// Cold-tier documents (shipped with KOPE) as Knowledge nodes, so prompts can cite them (USED).
UNWIND $rows AS row
MERGE (k:Knowledge {uid: row.uid})
SET k += row
RETURN count(k) AS written
