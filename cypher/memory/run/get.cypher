// mode: read
// One run with its task and hardware facts, its totals and its incumbent.
MATCH (run:Run {uid: $uid})
RETURN run.id AS id, run.team AS team, run.task_id AS task_id, run.operator AS operator,
       run.family AS family, run.target AS target, run.hw_id AS hw_id, run.hw_class AS hw_class,
       run.vendor AS vendor, run.proposer AS proposer, run.model AS model,
       run.context_policy AS context_policy, run.memory_enabled AS memory_enabled,
       run.started_at AS started_at, run.ended_at AS ended_at, run.status AS status,
       coalesce(run.steps, 0) AS steps, run.last_step AS last_step,
       coalesce(run.prompt_tokens, 0) AS prompt_tokens,
       coalesce(run.completion_tokens, 0) AS completion_tokens,
       run.best_speedup AS best_speedup, run.incumbent_id AS incumbent_id,
       run.budgets_json AS budgets_json, run.level AS level, run.case_names AS case_names
