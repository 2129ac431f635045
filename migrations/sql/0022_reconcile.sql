-- Reconciliation (pgimageai reconcile, and the bridge after partition DDL).
--
-- A backfill may be queued over a range of keys: the rows that reconcile
-- found without a result. The bridge picks a queued backfill up at its next
-- check and runs it like a backfill resumed after last_key up to stop_key.
ALTER TABLE pgimageai.backfills DROP CONSTRAINT IF EXISTS backfills_state_check;
ALTER TABLE pgimageai.backfills ADD CONSTRAINT backfills_state_check CHECK (state IN ('running', 'done', 'queued'));

-- The source table (its OID) whose rows each rule's results were computed
-- from. A rule whose source table resolves to another OID (the table was
-- dropped and created again under its name, or the rule names another
-- table) has its target emptied before the new table is backfilled: the old
-- table's results go. Written in the target transaction of that emptying.
CREATE TABLE pgimageai.rule_sources (
  rule       text PRIMARY KEY,
  source_oid oid NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.rule_sources TO %s');
