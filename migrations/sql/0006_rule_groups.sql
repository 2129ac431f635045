-- Rule groups (scale-out): each group is streamed by its own `pgimageai run
-- --group NAME`, through its own slot, publication and leader lock, so that
-- different tables' work runs on different machines.
ALTER TABLE pgimageai.rules ADD COLUMN rule_group text NOT NULL DEFAULT 'default'
  CONSTRAINT rules_group_name CHECK (rule_group ~ '^[a-z0-9_]{1,40}$');
