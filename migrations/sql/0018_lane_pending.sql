-- What each lane of a slot holds, as the slot's leader last saw it (stored
-- every 5 seconds): pgimageai status shows how many changes wait and the age
-- of the oldest, so that a lane that holds the slot is named.
CREATE TABLE pgimageai.lane_pending (
  slot               text NOT NULL,
  lane               text NOT NULL,
  pending            bigint NOT NULL,      -- changes routed to the lane and not yet written
  oldest_commit_time timestamptz,          -- source commit time of the oldest; NULL when none
  updated_at         timestamptz NOT NULL,
  PRIMARY KEY (slot, lane)
);

-- The bridge writes this table: a role that may write the bridge's state
-- already (the least-privilege role of the docs) may write it too, so that
-- an upgrade needs no new GRANT.
SELECT pgimageai.grant_to_bridge_roles('GRANT SELECT, INSERT, UPDATE, DELETE ON pgimageai.lane_pending TO %s');
