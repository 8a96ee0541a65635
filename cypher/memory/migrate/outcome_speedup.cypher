// Migration (issue 31): one word per number on Outcome nodes. Graphs written before it hold the
// usable speedup (the decision's a) in `speedup` and the measured one in `speedup_measured`; now
// `speedup` is the measured one, as in the harness's record, and `speedup_usable` is the decision's a.
// An outcome is in the old shape when it has `speedup_measured`, or lacks `speedup_usable` while its
// decision's a is known (the old writer dropped a null measured speedup). A migrated outcome matches
// neither, so running it again changes nothing. Confined to the namespace.
MATCH (d:Decision)-[:PRODUCED]->(o:Outcome)
WHERE o.ns = $ns AND d.ns = $ns
  AND (o.speedup_measured IS NOT NULL OR (o.speedup_usable IS NULL AND d.a IS NOT NULL))
SET o.speedup = o.speedup_measured, o.speedup_usable = d.a
REMOVE o.speedup_measured
RETURN count(o) AS changed
