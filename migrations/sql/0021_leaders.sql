-- The leader of each slot: the session of the pgimageai run that streams it,
-- named by its backend PID, its role and its start time. A session that no
-- longer exists (pg_stat_activity has no such PID of that role and start)
-- leads nothing: another instance claims the row in one statement. Only
-- roles that may write the bridge's state may write this table, so no other
-- role of the database can take the leadership from the bridge or keep it
-- from it, as any role could with an advisory lock.
CREATE TABLE pgimageai.leaders (
  slot          text PRIMARY KEY,
  pid           integer NOT NULL,
  role          oid NOT NULL,
  backend_start timestamptz NOT NULL,
  since         timestamptz NOT NULL DEFAULT now()
);

SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.leaders TO %s');
