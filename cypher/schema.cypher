// The Experience Graph's schema: applied idempotently by `kope memory init`
// and on first use (kope/memory/schema.py). Neo4j Community 5.26 features only:
// single-property uniqueness constraints, range, and full-text indexes.
//
// Uniqueness is on `uid` = "<namespace>/<id>" (Community has no composite
// uniqueness), so ids are unique per namespace and MERGE on uid is idempotent.
CREATE CONSTRAINT kope_operator_uid IF NOT EXISTS FOR (n:Operator) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_hardware_uid IF NOT EXISTS FOR (n:Hardware) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_task_uid IF NOT EXISTS FOR (n:Task) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_run_uid IF NOT EXISTS FOR (n:Run) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_decision_uid IF NOT EXISTS FOR (n:Decision) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_outcome_uid IF NOT EXISTS FOR (n:Outcome) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_kernel_uid IF NOT EXISTS FOR (n:Kernel) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_insight_uid IF NOT EXISTS FOR (n:Insight) REQUIRE n.uid IS UNIQUE;
CREATE CONSTRAINT kope_knowledge_uid IF NOT EXISTS FOR (n:Knowledge) REQUIRE n.uid IS UNIQUE;

// Namespace scans (stats, prune, export counts).
CREATE INDEX kope_operator_ns IF NOT EXISTS FOR (n:Operator) ON (n.ns);
CREATE INDEX kope_hardware_ns IF NOT EXISTS FOR (n:Hardware) ON (n.ns);
CREATE INDEX kope_task_ns IF NOT EXISTS FOR (n:Task) ON (n.ns);
CREATE INDEX kope_run_ns IF NOT EXISTS FOR (n:Run) ON (n.ns);
CREATE INDEX kope_decision_ns IF NOT EXISTS FOR (n:Decision) ON (n.ns);
CREATE INDEX kope_outcome_ns IF NOT EXISTS FOR (n:Outcome) ON (n.ns);
CREATE INDEX kope_kernel_ns IF NOT EXISTS FOR (n:Kernel) ON (n.ns);
CREATE INDEX kope_insight_ns IF NOT EXISTS FOR (n:Insight) ON (n.ns);
CREATE INDEX kope_knowledge_ns IF NOT EXISTS FOR (n:Knowledge) ON (n.ns);

// Retrieval lookups: the relevance pool by operator and family (each first on the
// same hardware), hardware class, label and error kind (insight distillation);
// runs by start time (prune by age); a run's decisions.
CREATE INDEX kope_decision_operator IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.operator);
CREATE INDEX kope_decision_family IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.family);
CREATE INDEX kope_decision_operator_hw IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.operator, n.hw_id);
CREATE INDEX kope_decision_family_hw IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.family, n.hw_id);
CREATE INDEX kope_decision_hw_class IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.hw_class);
CREATE INDEX kope_decision_label IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.label);
CREATE INDEX kope_decision_error_kind IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.error_kind);
CREATE INDEX kope_decision_run IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.run_id);
// The write path finds a run's last decision by its step (cypher/memory/attempt/lock_runs.cypher).
CREATE INDEX kope_decision_run_step IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.run_id, n.step);
// The cost model's training sample: the attempts of one kernel template (kope/memory/tuning.py).
CREATE INDEX kope_decision_template IF NOT EXISTS FOR (n:Decision) ON (n.ns, n.template);
CREATE INDEX kope_run_started IF NOT EXISTS FOR (n:Run) ON (n.ns, n.started_at);
CREATE INDEX kope_insight_scope IF NOT EXISTS FOR (n:Insight) ON (n.ns, n.family, n.hw_class);

// Full-text search over what was thought and what went wrong (updated in the
// background after commit, so recording does not wait for Lucene).
CREATE FULLTEXT INDEX kope_text IF NOT EXISTS FOR (n:Decision|Outcome) ON EACH [n.title, n.thought, n.error_excerpt]
OPTIONS {indexConfig: {`fulltext.eventually_consistent`: true}};

CALL db.awaitIndexes(300)
