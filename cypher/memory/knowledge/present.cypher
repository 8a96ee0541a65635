// mode: read
// Which of these knowledge documents the graph holds (journal sync replays the others before the attempts citing them).
UNWIND $uids AS u
MATCH (k:Knowledge {uid: u})
RETURN u AS uid
