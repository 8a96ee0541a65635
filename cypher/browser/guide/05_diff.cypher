// mode: read
// title: The kernel diff
// text: What a decision changed in the kernel, as a unified diff against the kernel of the state it started from (the Decision's <code>diff</code>; the whole source is on its Kernel). By default the fastest correct decision that has a parent; set <code>decision</code> for another. The Text view reads best.
// param: ns
// param: decision => null
CALL () {
  MATCH (d:Decision)
  WHERE d.ns = $ns AND d.status = 'correct' AND d.diff IS NOT NULL
  RETURN d.id AS fastest
  ORDER BY coalesce(d.a, -1.0) DESC, d.id
  LIMIT 1
}
MATCH (d:Decision {uid: $ns + '/' + coalesce($decision, fastest)})
UNWIND range(0, size(split(coalesce(d.diff, '(no diff: a root, or no kernel)'), '\n')) - 1) AS i
RETURN d.caption AS decision, i + 1 AS line, split(coalesce(d.diff, '(no diff: a root, or no kernel)'), '\n')[i] AS diff
ORDER BY line
