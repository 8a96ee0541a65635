// mode: read
// title: Memory growth over runs
// text: Runs in the order they started, with their attempts, the attempts the memory held after each, and the best speedup each run found.
MATCH (r:Run)
WHERE r.ns = $ns
WITH r ORDER BY r.started_at, r.id
WITH collect(r) AS runs
UNWIND range(0, size(runs) - 1) AS i
WITH i, runs[i] AS r, runs
RETURN i + 1 AS run_number, r.id AS run, r.operator AS operator, r.team AS team,
       coalesce(r.steps, 0) AS attempts,
       reduce(total = 0, x IN runs[0..i + 1] | total + coalesce(x.steps, 0)) AS attempts_in_memory,
       r.best_speedup AS best_speedup
ORDER BY run_number
