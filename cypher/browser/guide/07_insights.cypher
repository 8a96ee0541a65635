// mode: read
// title: Insights and the outcomes they came from
// text: What the memory distilled: validity rules (a kind of kernel failed this way on this hardware class, <code>support</code> times, <code>confidence</code> = how often) and patterns (decisions of one layer were effective this often, with their median step ratio). Each is DERIVED_FROM the outcomes it was counted from (with <i>Connect result nodes</i> on, Browser also draws the FROM edges between those outcomes: which descend from which); click one for its text. Retrieval hands the applicable ones to every prompt.
// param: ns
MATCH path = (i:Insight)-[:DERIVED_FROM]->(:Outcome)
WHERE i.ns = $ns AND i.active
RETURN path
