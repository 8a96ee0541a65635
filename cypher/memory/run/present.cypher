// mode: read
// Which of these runs the graph holds, and whether/how they ended (journal sync).
UNWIND $uids AS u
MATCH (run:Run {uid: u})
RETURN u AS uid, run.status AS status, run.ended_at AS ended_at
