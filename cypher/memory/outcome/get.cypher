// mode: read
// The outcome a decision produced (the latest feedback when a run resumes).
MATCH (:Decision {uid: $uid})-[:PRODUCED]->(o:Outcome)
RETURN o.id AS id, o.status AS status, o.cases_total AS cases_total, o.cases_passed AS cases_passed,
       o.speedup AS speedup, o.speedup_usable AS speedup_usable, o.error_kind AS error_kind,
       o.error_excerpt AS error_excerpt, o.timings_valid AS timings_valid, o.confidence AS confidence,
       o.r AS r, o.label AS label, o.compile_time_s AS compile_time_s, o.threads AS threads,
       o.duration_s AS duration_s, o.cases_json AS cases_json, o.deployed_speedup AS deployed_speedup,
       o.deployed_error AS deployed_error, o.deployed_at AS deployed_at
