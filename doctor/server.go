package doctor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/internal/bytesize"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/value"
)

// Platform is a managed PostgreSQL service, told by the roles it creates;
// its settings are changed in its console, not in postgresql.conf.
type Platform uint8

// The platforms doctor tells apart.
const (
	SelfHosted Platform = iota
	RDS                 // Amazon RDS and Aurora: rds_superuser
	CloudSQL            // Google Cloud SQL: cloudsqlsuperuser
	Azure               // Azure Database for PostgreSQL flexible server: azure_pg_admin
	Supabase            // supabase_admin
	Neon                // neon_superuser
)

// String names the platform.
func (p Platform) String() string {
	return [...]string{"self-hosted", "Amazon RDS / Aurora", "Google Cloud SQL", "Azure Database for PostgreSQL", "Supabase", "Neon"}[p]
}

// server is what the catalogs say about the server and the bridge's objects.
type server struct {
	serverBuild
	loginRole
	capacity
	slotSeen
	Database         string
	PublicationFound bool
}

// serverBuild is what the server is and how it is set up to replicate.
type serverBuild struct {
	VersionNum int
	Version    string
	WALLevel   string
	InRecovery bool
	Platform   Platform
}

// loginRole is the login role and what it may do.
type loginRole struct {
	Role               string
	Super, Replication bool // the login role's attributes (Replication includes rds_replication)
	CreateOnDatabase   bool
}

// capacity is the server's slots and WAL senders, used and allowed.
type capacity struct {
	MaxSlots, Slots     int
	MaxSenders, Senders int
	KeepSizeMB          int // max_slot_wal_keep_size; -1 = unlimited (-2: before PostgreSQL 13)
}

// slotSeen is the bridge's slot, where it exists.
type slotSeen struct {
	Slot         replication.SlotUsage
	SlotFound    bool
	SlotDatabase string
}

func readServer(ctx context.Context, conn *pgx.Conn, slot, publication string) (server, error) {
	var s server
	var platform string
	err := conn.QueryRow(ctx, `
SELECT pg_catalog.current_setting('server_version_num')::int, pg_catalog.current_setting('server_version'),
  pg_catalog.current_setting('wal_level'), pg_catalog.pg_is_in_recovery(),
  r.rolname, r.rolsuper,
  r.rolreplication OR (pg_catalog.to_regrole('rds_replication') IS NOT NULL AND pg_catalog.pg_has_role(session_user, 'rds_replication', 'MEMBER')),
  pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),
  pg_catalog.current_setting('max_replication_slots')::int, (SELECT pg_catalog.count(*) FROM pg_catalog.pg_replication_slots)::int,
  pg_catalog.current_setting('max_wal_senders')::int,
  (SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender')::int,
  coalesce(pg_catalog.current_setting('max_slot_wal_keep_size', true)::int, -2),
  CASE WHEN pg_catalog.to_regrole('rds_superuser') IS NOT NULL THEN 'rds'
       WHEN pg_catalog.to_regrole('cloudsqlsuperuser') IS NOT NULL THEN 'cloudsql'
       WHEN pg_catalog.to_regrole('azure_pg_admin') IS NOT NULL THEN 'azure'
       WHEN pg_catalog.to_regrole('supabase_admin') IS NOT NULL THEN 'supabase'
       WHEN pg_catalog.to_regrole('neon_superuser') IS NOT NULL THEN 'neon'
       ELSE '' END,
  pg_catalog.current_database(),
  EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = $1)
FROM pg_catalog.pg_roles r WHERE r.rolname = session_user`, publication).Scan(
		&s.VersionNum, &s.Version, &s.WALLevel, &s.InRecovery, &s.Role, &s.Super, &s.Replication, &s.CreateOnDatabase,
		&s.MaxSlots, &s.Slots, &s.MaxSenders, &s.Senders, &s.KeepSizeMB, &platform, &s.Database, &s.PublicationFound)
	if err != nil {
		return s, fmt.Errorf("read the server's settings: %w", err)
	}
	s.Platform = map[string]Platform{"rds": RDS, "cloudsql": CloudSQL, "azure": Azure, "supabase": Supabase, "neon": Neon}[platform]
	sl, found, err := replication.ReadSlot(ctx, conn, slot)
	if err != nil {
		return s, err
	}
	if found {
		s.SlotFound, s.SlotDatabase = true, sl.Database
		if s.Slot, _, err = replication.ReadSlotUsage(ctx, conn, slot); err != nil {
			return s, err
		}
	}
	return s, nil
}

// checks judges the facts: pure, table-tested.
func (s server) checks(cfg Config) []Check {
	var out []Check
	if s.VersionNum < replication.MinServerVersion {
		out = append(out, fail("server", "version", "PostgreSQL "+s.Version, "pgimageai needs PostgreSQL 14 or later (binary pgoutput); upgrade the server"))
	} else {
		out = append(out, pass("server", "version", fmt.Sprintf("PostgreSQL %s (%s)", s.Version, s.Platform)))
	}
	if s.InRecovery {
		out = append(out, fail("server", "primary", "the server is a standby in recovery",
			"connect to the primary (a multi-host DSN with target_session_attrs=read-write follows failovers)"))
	}
	if s.WALLevel == "logical" {
		out = append(out, pass("server", "wal_level", "logical"))
	} else {
		out = append(out, fail("server", "wal_level", s.WALLevel, s.walLevelFix()))
	}
	switch {
	case s.Super:
		out = append(out, warn("role", "privileges", fmt.Sprintf("role %s is a superuser", s.Role),
			"run the bridge as a role of its own with REPLICATION and only the grants it needs (docs/operations.md, a least-privilege role)"))
	case s.Replication:
		out = append(out, pass("role", "privileges", fmt.Sprintf("role %s may stream (REPLICATION)", s.Role)))
	default:
		out = append(out, fail("role", "privileges", fmt.Sprintf("role %s lacks REPLICATION", s.Role), s.replicationFix()))
	}
	if !s.Super && !s.CreateOnDatabase && !s.PublicationFound {
		out = append(out, fail("role", "create publication", fmt.Sprintf("role %s may not CREATE in database %s", s.Role, s.Database),
			fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s; (or create publication %s as its owner)", ident(s.Database), ident(s.Role), ident(cfg.Publication))))
	}
	free := s.MaxSlots - s.Slots
	switch {
	case s.SlotFound:
		out = append(out, pass("server", "replication slots", fmt.Sprintf("%d of %d used, this bridge's among them", s.Slots, s.MaxSlots)))
	case free <= 0:
		out = append(out, fail("server", "replication slots", fmt.Sprintf("all %d of max_replication_slots are used", s.MaxSlots),
			"drop a slot no longer used (pg_drop_replication_slot) or raise max_replication_slots (a restart)"))
	default:
		out = append(out, pass("server", "replication slots", fmt.Sprintf("%d of %d free", free, s.MaxSlots)))
	}
	if s.Senders >= s.MaxSenders && !(s.SlotFound && s.Slot.Active) {
		out = append(out, fail("server", "WAL senders", fmt.Sprintf("all %d of max_wal_senders are in use", s.MaxSenders), "raise max_wal_senders (a restart)"))
	} else {
		out = append(out, pass("server", "WAL senders", fmt.Sprintf("%d of %d in use", s.Senders, s.MaxSenders)))
	}
	switch {
	case s.KeepSizeMB == -1:
		out = append(out, warn("server", "max_slot_wal_keep_size", "unlimited (-1): a bridge that is stopped keeps WAL on the server until its disk is full",
			"set max_slot_wal_keep_size (e.g. ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT pg_reload_conf();) to what the disk can spare; a slot past it is invalidated and pgimageai recover-slot gets the bridge going again"))
	case s.KeepSizeMB >= 0:
		out = append(out, pass("server", "max_slot_wal_keep_size", fmt.Sprintf("%d MB", s.KeepSizeMB)))
	}
	return append(out, s.slotChecks(cfg)...)
}

func (s server) slotChecks(cfg Config) []Check {
	var out []Check
	area := "slot " + cfg.Slot
	switch {
	case !s.SlotFound:
		out = append(out, pass(area, "exists", "not yet: pgimageai run creates it"))
	case s.SlotDatabase != s.Database:
		out = append(out, fail(area, "exists", fmt.Sprintf("it belongs to database %s", s.SlotDatabase),
			"give this database's bridge a slot of its own (--slot), or leave --slot unset: the default carries the database"))
	case s.Slot.WALStatus == value.WALLost:
		out = append(out, fail(area, "wal_status", "lost: the server removed WAL the slot needed",
			"run pgimageai recover-slot: it re-creates the slot and every rule backfills"))
	case s.Slot.WALStatus == value.WALUnreserved:
		out = append(out, fail(area, "wal_status", fmt.Sprintf("unreserved: %s retained, past max_slot_wal_keep_size; the next checkpoint invalidates it", bytesize.Format(s.Slot.RetainedBytes)),
			"start pgimageai run (or let it catch up) now, or raise max_slot_wal_keep_size"))
	case !s.Slot.Active:
		out = append(out, warn(area, "retained WAL", fmt.Sprintf("%s retained, and no pgimageai run streams it", bytesize.Format(s.Slot.RetainedBytes)),
			"start pgimageai run; to take the bridge away, pgimageai uninstall drops the slot"))
	default:
		out = append(out, pass(area, "retained WAL", fmt.Sprintf("%s retained, streaming (wal_status %s)", bytesize.Format(s.Slot.RetainedBytes), s.Slot.WALStatus)))
	}
	return out
}

// walLevelFix says how to turn logical decoding on, on s's platform.
func (s server) walLevelFix() string {
	switch s.Platform {
	case RDS:
		return "set rds.logical_replication = 1 in the DB parameter group (the cluster parameter group on Aurora) and reboot the instance"
	case CloudSQL:
		return "set the database flag cloudsql.logical_decoding = on (the instance restarts)"
	case Azure:
		return "set the server parameter wal_level = logical (Server parameters in the portal, or az postgres flexible-server parameter set) and restart the server"
	case Supabase:
		return "Supabase projects run with wal_level = logical; connect directly to the database (port 5432), not through the pooler"
	case Neon:
		return "enable logical replication in the project's settings (Settings > Logical Replication); it cannot be turned off again"
	}
	return "set wal_level = logical (postgresql.conf, or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL"
}

// replicationFix says how to let the role stream, on s's platform.
func (s server) replicationFix() string {
	role := ident(s.Role)
	switch s.Platform {
	case RDS:
		return "GRANT rds_replication TO " + role + "; (as the master user: CREATE ROLE ... REPLICATION is not allowed on RDS)"
	case CloudSQL:
		return "ALTER ROLE " + role + " WITH REPLICATION; (as a member of cloudsqlsuperuser, with cloudsql.logical_decoding on)"
	case Azure:
		return "ALTER ROLE " + role + " WITH REPLICATION; (as the administrator, a member of azure_pg_admin)"
	}
	return "ALTER ROLE " + role + " REPLICATION; (as a superuser)"
}
