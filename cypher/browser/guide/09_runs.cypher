// mode: read
// title: Teams and runs compared
// text: Every run of the namespace by operator and start: the team that made it, proposer and context policy, whether memory was on, attempts, tokens, and the best speedup it reached.
// param: ns
MATCH (r:Run)
WHERE r.ns = $ns
OPTIONAL MATCH (r)-[:INCUMBENT]->(best:Decision)
RETURN r.operator AS operator, r.caption AS run, r.team AS team, r.proposer AS proposer,
       r.context_policy AS policy, r.memory_enabled AS memory, coalesce(r.steps, 0) AS attempts,
       coalesce(r.prompt_tokens, 0) + coalesce(r.completion_tokens, 0) AS tokens,
       round(r.best_speedup, 2) AS best_speedup, best.caption AS best, r.status AS status
ORDER BY operator, r.started_at, r.id
