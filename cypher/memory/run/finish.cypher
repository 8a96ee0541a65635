// End a run: status and end time (idempotent).
MATCH (run:Run {uid: $uid})
SET run.ended_at = $ended_at, run.status = $status
RETURN run.id AS id, run.family AS family, run.operator AS operator, run.started_at AS started_at
