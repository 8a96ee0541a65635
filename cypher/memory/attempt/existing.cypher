// Which of these decisions exist already, with the hash of their content.
UNWIND $uids AS u
MATCH (d:Decision {uid: u})
RETURN d.uid AS uid, d.attempt_hash AS attempt_hash
