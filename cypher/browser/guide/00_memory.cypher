// mode: read
// title: The KOPE Experience Graph
// text: Every attempt an agent made is here: the <b>Decision</b> (what was tried), its <b>Outcome</b> (what the target said), the <b>Kernel</b> it wrote, the <b>Run</b> and <b>Task</b> it belongs to, the <b>Hardware</b> it ran on, and the <b>Insights</b> distilled from repeated results. Decisions and outcomes are coloured by class, their speedup over PyTorch: <b>Effective</b> (green, at least 5% faster than PyTorch), <b>Partial</b> (yellow-green, no slower), <b>Ineffective</b> (amber), <b>Negative</b> (orange, more than 15% slower), <b>Failed</b> (red, not correct). A kernel 4× slower than PyTorch is Negative however much it gained on its parent; that gain is the mark after the speedup in its caption (<code>↑2.50</code>: 2.5× faster than its parent). A thick red ring marks a run's <b>Incumbent</b> (its best kernel).
// text: Every slide has two blocks: the first sets the slide's parameters (the namespace, and defaults for the others: edit a value there to look elsewhere), the second is its query. Click a block to put it in the editor, then run it. This slide counts what the namespace holds.
// param: ns
CALL () {
  MATCH (n:Operator) WHERE n.ns = $ns RETURN 'Operator' AS kind, count(n) AS nodes, 'an operator (a PyTorch reference in KernelBench format)' AS holds
  UNION ALL
  MATCH (n:Run) WHERE n.ns = $ns RETURN 'Run' AS kind, count(n) AS nodes, 'one optimisation session of a task' AS holds
  UNION ALL
  MATCH (n:Decision) WHERE n.ns = $ns RETURN 'Decision' AS kind, count(n) AS nodes, 'an attempt: title, thought, layer, diff against its parent' AS holds
  UNION ALL
  MATCH (n:Decision:Effective) WHERE n.ns = $ns RETURN '  Effective' AS kind, count(n) AS nodes, 'at least 5% faster than PyTorch' AS holds
  UNION ALL
  MATCH (n:Decision:Partial) WHERE n.ns = $ns RETURN '  Partial' AS kind, count(n) AS nodes, 'as fast as PyTorch, up to 5% faster' AS holds
  UNION ALL
  MATCH (n:Decision:Ineffective) WHERE n.ns = $ns RETURN '  Ineffective' AS kind, count(n) AS nodes, 'up to 15% slower than PyTorch' AS holds
  UNION ALL
  MATCH (n:Decision:Negative) WHERE n.ns = $ns RETURN '  Negative' AS kind, count(n) AS nodes, 'more than 15% slower than PyTorch' AS holds
  UNION ALL
  MATCH (n:Decision:Failed) WHERE n.ns = $ns RETURN '  Failed' AS kind, count(n) AS nodes, 'not correct on every case (see its Outcome)' AS holds
  UNION ALL
  MATCH (n:Outcome) WHERE n.ns = $ns RETURN 'Outcome' AS kind, count(n) AS nodes, 'status, speedup (measured), speedup_usable (a), per-case results, error excerpt' AS holds
  UNION ALL
  MATCH (n:Kernel) WHERE n.ns = $ns RETURN 'Kernel' AS kind, count(n) AS nodes, 'kernel source, stored once per content hash' AS holds
  UNION ALL
  MATCH (n:Insight) WHERE n.ns = $ns RETURN 'Insight' AS kind, count(n) AS nodes, 'validity rules and patterns distilled from outcomes' AS holds
  UNION ALL
  MATCH (n:Hardware) WHERE n.ns = $ns RETURN 'Hardware' AS kind, count(n) AS nodes, 'a machine fingerprint' AS holds
  UNION ALL
  MATCH (n:Knowledge) WHERE n.ns = $ns RETURN 'Knowledge' AS kind, count(n) AS nodes, 'hardware and language notes shipped with KOPE' AS holds
}
RETURN kind, nodes, holds
