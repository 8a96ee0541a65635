// mode: read
// Which of these insights the graph holds (journal sync: a USED edge is missing only where its evidence is there).
UNWIND $uids AS u
MATCH (i:Insight {uid: u})
RETURN u AS uid
