-- Nothing grows without bound: a cap on the OPEN errors rows of each rule,
-- and the retention of retry requests.
--
-- The cap. A rule at its cap records a failure of a source row that has no
-- open errors row yet by counting it in pgimageai.error_counts.dropped
-- instead of writing a row; a row that already has one still has it updated
-- (attempts + 1). A row '*' is the cap of every rule without a row of its
-- own; max_open NULL = no cap. Change with e.g.
--   UPDATE pgimageai.error_caps SET max_open = 20000 WHERE rule = '*';
--   INSERT INTO pgimageai.error_caps (rule, max_open) VALUES ('captions', 500)
--     ON CONFLICT (rule) DO UPDATE SET max_open = EXCLUDED.max_open;
CREATE TABLE pgimageai.error_caps (
  rule     text PRIMARY KEY,                  -- a rule's name, or '*'
  max_open bigint CHECK (max_open >= 0)       -- NULL: no cap
);
INSERT INTO pgimageai.error_caps (rule, max_open) VALUES ('*', 100000);

-- Per rule: how many errors rows are open (kept by the triggers below, in
-- the transaction that opens, resolves or deletes them, whoever runs it),
-- and how many failures were not recorded because the rule was at its cap,
-- since the row was made or dropped was last set to 0 by hand.
CREATE TABLE pgimageai.error_counts (
  rule            text PRIMARY KEY,
  open            bigint NOT NULL DEFAULT 0,
  dropped         bigint NOT NULL DEFAULT 0,
  last_dropped_at timestamptz
);

-- One function for the four triggers: the transition tables of a statement
-- give the change of open rows per rule, applied in one upsert per
-- statement (a statement that resolves 1,000 rows updates the count once).
-- SECURITY DEFINER: whoever may resolve or delete errors rows by hand keeps
-- the count right without a grant on pgimageai.error_counts.
CREATE FUNCTION pgimageai.count_open_errors() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    UPDATE pgimageai.error_counts SET open = 0 WHERE open <> 0;
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO pgimageai.error_counts AS c (rule, open)
    SELECT rule, count(*) FROM new_rows WHERE resolved_at IS NULL GROUP BY rule ORDER BY rule
    ON CONFLICT (rule) DO UPDATE SET open = c.open + EXCLUDED.open;
  ELSIF TG_OP = 'DELETE' THEN
    UPDATE pgimageai.error_counts c SET open = greatest(c.open - d.n, 0)
    FROM (SELECT rule, count(*) AS n FROM old_rows WHERE resolved_at IS NULL GROUP BY rule) d
    WHERE c.rule = d.rule;
  ELSE -- UPDATE: resolved, reopened by hand, or moved to another rule
    WITH d AS (
      SELECT rule, sum(n) AS n FROM (
        SELECT rule, 1 AS n FROM new_rows WHERE resolved_at IS NULL
        UNION ALL
        SELECT rule, -1 FROM old_rows WHERE resolved_at IS NULL
      ) x GROUP BY rule HAVING sum(n) <> 0
    ), counted AS (
      UPDATE pgimageai.error_counts c SET open = greatest(c.open + d.n, 0)
      FROM d WHERE c.rule = d.rule RETURNING c.rule
    )
    INSERT INTO pgimageai.error_counts AS c (rule, open)
    SELECT rule, n FROM d WHERE n > 0 AND rule NOT IN (SELECT rule FROM counted) ORDER BY rule
    ON CONFLICT (rule) DO UPDATE SET open = c.open + EXCLUDED.open;
  END IF;
  RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION pgimageai.count_open_errors() FROM PUBLIC;

CREATE TRIGGER count_open_inserted AFTER INSERT ON pgimageai.errors
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pgimageai.count_open_errors();
CREATE TRIGGER count_open_updated AFTER UPDATE ON pgimageai.errors
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pgimageai.count_open_errors();
CREATE TRIGGER count_open_deleted AFTER DELETE ON pgimageai.errors
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pgimageai.count_open_errors();
CREATE TRIGGER count_open_truncated AFTER TRUNCATE ON pgimageai.errors
  FOR EACH STATEMENT EXECUTE FUNCTION pgimageai.count_open_errors();

-- The rows open now. CREATE TRIGGER locked pgimageai.errors against writes
-- until this migration commits, so no change slips between the count and
-- the triggers.
INSERT INTO pgimageai.error_counts (rule, open)
SELECT rule, count(*) FROM pgimageai.errors WHERE resolved_at IS NULL GROUP BY rule;

-- Retry requests: the bridge reads them from the WAL, never from the table,
-- so a row the slot has passed is history. seen_lsn is a WAL position past
-- the row's commit, noted by the retention; the row is deleted once the
-- slot's confirmed_flush_lsn has reached it and it is older than its keep.
ALTER TABLE pgimageai.retry_requests ADD COLUMN seen_lsn pg_lsn;
ALTER TABLE pgimageai.retention DROP CONSTRAINT retention_what_check;
ALTER TABLE pgimageai.retention ADD CONSTRAINT retention_what_check
  CHECK (what IN ('resolved_errors', 'usage', 'own_xacts', 'model_pace', 'retry_requests'));
INSERT INTO pgimageai.retention (what, keep) VALUES ('retry_requests', '7 days');

-- The bridge reads the caps and writes the counts beside its errors rows, and
-- deletes retry requests: a role that may write the bridge's state already
-- (the least-privilege role of the docs) may do these too, so that an
-- upgrade needs no new GRANT.
SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT ON pgimageai.error_caps TO %s');
SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.error_counts TO %s');
SELECT pgimageai.grant_to_bridge_roles('GRANT UPDATE (seen_lsn), DELETE ON pgimageai.retry_requests TO %s');
