// mode: read
// Which of these decision uids the graph holds (journal sync).
UNWIND $uids AS u
MATCH (d:Decision {uid: u})
RETURN u AS uid
