// mode: read
// Which of these decisions' outcomes hold an as-deployed measurement, and
// when it was taken (journal sync: a journaled one the graph lacks is replayed).
UNWIND $uids AS u
MATCH (:Decision {uid: u})-[:PRODUCED]->(o:Outcome)
WHERE o.deployed_at IS NOT NULL
RETURN u AS uid, o.deployed_at AS measured_at
