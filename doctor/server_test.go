package doctor

import (
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/replication"
)

func healthy() server {
	return server{serverBuild: serverBuild{VersionNum: 170000, Version: "17.2", WALLevel: "logical"},
		loginRole: loginRole{Role: "bridge", Replication: true, CreateOnDatabase: true},
		capacity:  capacity{MaxSlots: 10, Slots: 2, MaxSenders: 10, Senders: 1, KeepSizeMB: 51200}, Database: "shop"}
}

func TestServerChecks(t *testing.T) {
	cfg := Config{Slot: "s", Publication: "pgimageai"}
	tests := []struct {
		name        string
		edit        func(*server)
		check       string // Area/Name
		status      Status
		detail, fix string
	}{
		{"healthy version", func(*server) {}, "server/version", Pass, "PostgreSQL 17.2 (self-hosted)", ""},
		{"too old", func(s *server) { s.VersionNum, s.Version = 130012, "13.12" }, "server/version", Fail, "13.12", "PostgreSQL 14 or later"},
		{"standby", func(s *server) { s.InRecovery = true }, "server/primary", Fail, "standby", "target_session_attrs=read-write"},
		{"wal_level", func(s *server) { s.WALLevel = "replica" }, "server/wal_level", Fail, "replica", "ALTER SYSTEM SET wal_level = logical"},
		{"wal_level on RDS", func(s *server) { s.WALLevel, s.Platform = "replica", RDS }, "server/wal_level", Fail, "replica", "rds.logical_replication = 1"},
		{"wal_level on Cloud SQL", func(s *server) { s.WALLevel, s.Platform = "replica", CloudSQL }, "server/wal_level", Fail, "", "cloudsql.logical_decoding = on"},
		{"wal_level on Azure", func(s *server) { s.WALLevel, s.Platform = "replica", Azure }, "server/wal_level", Fail, "", "server parameter wal_level = logical"},
		{"wal_level on Neon", func(s *server) { s.WALLevel, s.Platform = "replica", Neon }, "server/wal_level", Fail, "", "Logical Replication"},
		{"no replication", func(s *server) { s.Replication = false }, "role/privileges", Fail, "lacks REPLICATION", `ALTER ROLE "bridge" REPLICATION`},
		{"no replication on RDS", func(s *server) { s.Replication, s.Platform = false, RDS }, "role/privileges", Fail, "", `GRANT rds_replication TO "bridge"`},
		{"superuser", func(s *server) { s.Super = true }, "role/privileges", Warn, "superuser", "least-privilege"},
		{"no create", func(s *server) { s.CreateOnDatabase = false }, "role/create publication", Fail, "may not CREATE", `GRANT CREATE ON DATABASE "shop" TO "bridge"`},
		{"slots full", func(s *server) { s.Slots = 10 }, "server/replication slots", Fail, "all 10", "max_replication_slots"},
		{"slots full, ours among them", func(s *server) { s.Slots, s.SlotFound, s.SlotDatabase = 10, true, "shop" }, "server/replication slots", Pass, "this bridge's among them", ""},
		{"senders full", func(s *server) { s.Senders = 10 }, "server/WAL senders", Fail, "all 10", "max_wal_senders"},
		{"keep size unlimited", func(s *server) { s.KeepSizeMB = -1 }, "server/max_slot_wal_keep_size", Warn, "unlimited", "recover-slot"},
		{"slot elsewhere", func(s *server) { s.SlotFound, s.SlotDatabase = true, "other" }, "slot s/exists", Fail, "database other", "--slot"},
		{"slot lost", func(s *server) { s.SlotFound, s.SlotDatabase, s.Slot.WALStatus = true, "shop", "lost" }, "slot s/wal_status", Fail, "lost", "pgimageai recover-slot"},
		{"slot unreserved", func(s *server) {
			s.SlotFound, s.SlotDatabase, s.Slot = true, "shop", replication.SlotUsage{WALStatus: "unreserved", RetainedBytes: 3 << 30}
		}, "slot s/wal_status", Fail, "3.0 GiB retained", "raise max_slot_wal_keep_size"},
		{"slot idle", func(s *server) {
			s.SlotFound, s.SlotDatabase, s.Slot = true, "shop", replication.SlotUsage{WALStatus: "reserved", RetainedBytes: 5 << 20}
		}, "slot s/retained WAL", Warn, "5.0 MiB retained", "pgimageai uninstall"},
		{"slot streaming", func(s *server) {
			s.SlotFound, s.SlotDatabase, s.Slot = true, "shop", replication.SlotUsage{Active: true, WALStatus: "reserved", RetainedBytes: 1024}
		}, "slot s/retained WAL", Pass, "1.0 KiB retained, streaming", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := healthy()
			tt.edit(&s)
			var found *Check
			for _, c := range s.checks(cfg) {
				if c.Area+"/"+c.Name == tt.check {
					found = &c
				}
			}
			if found == nil {
				t.Fatalf("no check %s in %v", tt.check, s.checks(cfg))
			}
			if found.Status != tt.status || !strings.Contains(found.Detail, tt.detail) || !strings.Contains(found.Fix, tt.fix) {
				t.Fatalf("%s = %+v; want %v, %q, fix %q", tt.check, *found, tt.status, tt.detail, tt.fix)
			}
		})
	}
	if w := Report(healthy().checks(cfg)).Worst(); w != Pass {
		t.Fatalf("a healthy server's worst check is %v", w)
	}
}
