// mode: read
// Which of these runs exist already, with the hash of what they were started with.
UNWIND $uids AS u
MATCH (run:Run {uid: u})
RETURN run.uid AS uid, run.spec_hash AS spec_hash
