// A run's caption (operator and start, from kope/memory/present.py) and its
// start and end as Neo4j datetimes, from the epoch seconds the code compares.
// Rows are {uid, caption}. Idempotent.
UNWIND $rows AS row
MATCH (run:Run {uid: row.uid})
SET run.caption = row.caption,
    run.started = datetime({epochMillis: toInteger(round(run.started_at * 1000))}),
    run.ended = CASE WHEN run.ended_at IS NULL THEN null
                     ELSE datetime({epochMillis: toInteger(round(run.ended_at * 1000))}) END
RETURN count(*) AS presented
