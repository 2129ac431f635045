-- The target tables the bridge created itself (rather than found), recorded
-- in the transaction of their CREATE TABLE: when a source's primary key is
-- widened (integer to bigint, varchar(n) to text, ...), the bridge widens the
-- key columns of these tables to follow, and only of these; for any other
-- target it reports the ALTER TABLE statement to run.
--
-- Keyed by regclass, that is by the table's OID: the row follows the table
-- through ALTER TABLE ... RENAME and SET SCHEMA, never names a table that
-- merely took the old name, and is dumped and restored by name
-- (pg_dump writes a regclass as its name). A row whose table was dropped is
-- deleted when the bridge next creates a table.
--
-- To let the bridge widen a table it did not create (or created before this
-- table existed):
--   INSERT INTO pgimageai.created_targets (relid) VALUES ('public.captions');
CREATE TABLE pgimageai.created_targets (
  relid      regclass PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The bridge writes this table when it creates a target: a role that may
-- write the bridge's state already (the least-privilege role of the docs)
-- may write it too, so that an upgrade needs no new GRANT.
SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.created_targets TO %s');
