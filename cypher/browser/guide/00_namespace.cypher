// mode: read
// title: The KOPE Experience Graph
// text: Every attempt an agent made is here: the <b>Decision</b> (what was tried, yellow), its <b>Outcome</b> (what the target said), the <b>Kernel</b> it wrote, the <b>Run</b> and <b>Task</b> it belongs to, the <b>Hardware</b> it ran on. <b>FROM</b> edges (orange, thick) form lineages: the children of one decision are alternative branches. <b>NEXT</b> keeps time order inside a run. <b>USED</b> edges show the evidence each prompt contained.
// text: The queries in this guide read the namespace in the parameter <code>ns</code>. Run the <code>:param</code> line first (change the value for another namespace), then this query: how many nodes of each kind the namespace holds.
// param: true
MATCH (n)
WHERE n.ns = $ns
RETURN labels(n)[0] AS kind, count(*) AS nodes
ORDER BY nodes DESC, kind
