// mode: read
// One run as an optimization step reads it, in one statement: the run with its task and hardware
// facts, its totals and its incumbent, and every decision in step order with the outcome it produced.
MATCH (run:Run {uid: $uid})
CALL {
  MATCH (d:Decision {ns: $ns, run_id: $run_id})
  USING INDEX SEEK d:Decision(ns, run_id)
  OPTIONAL MATCH (d)-[:PRODUCED]->(o:Outcome)
  WITH d, o
  ORDER BY d.step
  RETURN collect({
    decision: d {.id, .run_id, .step, .title, .layer, .thought, .parent_id, .code_hash, .status, .label,
                 .a, .r, .d, .conf, .error_kind, .operator, .family, .target, .hw_id, .hw_class, .vendor,
                 .created_at, .prompt_tokens, .completion_tokens, .params_json},
    outcome: o {.id, .status, .cases_total, .cases_passed, .speedup, .speedup_usable, .error_kind,
                .error_excerpt, .timings_valid, .confidence, .r, .label, .compile_time_s, .threads,
                .duration_s, .cases_json}
  }) AS attempts
}
RETURN run {.id, .team, .task_id, .operator, .family, .target, .hw_id, .hw_class, .vendor, .proposer,
            .model, .context_policy, .memory_enabled, .started_at, .ended_at, .status, .last_step,
            .best_speedup, .incumbent_id, .budgets_json, .level, .case_names,
            steps: coalesce(run.steps, 0), prompt_tokens: coalesce(run.prompt_tokens, 0),
            completion_tokens: coalesce(run.completion_tokens, 0)} AS run,
       attempts
