// mode: read
// The relationships of these decisions that their journaled attempts say they
// have (journal sync compares the two): the run (IN_RUN), the parent (FROM),
// the outcome (PRODUCED), the kernel (WROTE) and the evidence (USED).
UNWIND $uids AS u
MATCH (d:Decision {uid: u})
RETURN u AS uid,
       [(d)-[:IN_RUN]->(run:Run) | run.id] AS runs,
       [(d)-[:FROM]->(p:Decision) | p.id] AS parents,
       COUNT { (d)-[:PRODUCED]->(:Outcome) } AS produced,
       COUNT { (d)-[:WROTE]->(:Kernel) } AS wrote,
       [(d)-[:USED]->(t) |
         [CASE WHEN t:Decision THEN 'decision' WHEN t:Insight THEN 'insight' ELSE 'knowledge' END, t.id]] AS used
