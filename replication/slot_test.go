package replication

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSlot(t *testing.T) {
	pg15 := `{"slot_name": "pgimageai", "plugin": "pgoutput", "slot_type": "logical", "datoid": 5, "database": "app",
		"temporary": false, "active": true, "active_pid": 42, "xmin": null, "catalog_xmin": "750",
		"restart_lsn": "0/1A2B3C8", "confirmed_flush_lsn": "0/1A2B400", "wal_status": "reserved",
		"safe_wal_size": null, "two_phase": false}`
	s, err := parseSlot([]byte(pg15))
	if err != nil {
		t.Fatal(err)
	}
	want := Slot{Name: "pgimageai", Type: "logical", Plugin: "pgoutput", Database: "app", Active: true,
		RestartLSN: 0x1A2B3C8, ConfirmedFlushLSN: 0x1A2B400, WALStatus: "reserved"}
	if s != want {
		t.Errorf("got %+v\nwant %+v", s, want)
	}

	pg17 := `{"slot_name": "s", "plugin": "pgoutput", "slot_type": "logical", "database": "app", "temporary": false,
		"active": false, "restart_lsn": null, "confirmed_flush_lsn": "1/0", "wal_status": "lost",
		"conflicting": false, "invalidation_reason": "wal_removed"}`
	s, err = parseSlot([]byte(pg17))
	if err != nil {
		t.Fatal(err)
	}
	if s.InvalidationReason != "wal_removed" || s.WALStatus != "lost" || s.ConfirmedFlushLSN != 1<<32 || s.RestartLSN != 0 {
		t.Errorf("got %+v", s)
	}
	if _, err := parseSlot([]byte(`{"slot_name": "s", "confirmed_flush_lsn": "zz"}`)); err == nil {
		t.Error("bad LSN accepted")
	}
}

func TestSlotCheck(t *testing.T) {
	good := Slot{Name: "s", Type: "logical", Plugin: "pgoutput", Database: "app", ConfirmedFlushLSN: 10, WALStatus: "reserved"}
	tests := []struct {
		name    string
		edit    func(*Slot)
		wantErr error
	}{
		{"usable", func(*Slot) {}, nil},
		{"unreserved still streams", func(s *Slot) { s.WALStatus = "unreserved" }, nil},
		{"other plugin", func(s *Slot) { s.Plugin = "wal2json" }, ErrSlotMismatch},
		{"physical", func(s *Slot) { s.Type = "physical"; s.Plugin = "" }, ErrSlotMismatch},
		{"other database", func(s *Slot) { s.Database = "other" }, ErrSlotMismatch},
		{"temporary", func(s *Slot) { s.Temporary = true }, ErrSlotMismatch},
		{"wal lost", func(s *Slot) { s.WALStatus = "lost" }, ErrSlotInvalidated},
		{"invalidation reason", func(s *Slot) { s.InvalidationReason = "rows_removed" }, ErrSlotInvalidated},
		{"conflicting", func(s *Slot) { s.Conflicting = true }, ErrSlotInvalidated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.edit(&s)
			err := s.check("app")
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if errors.Is(err, ErrSlotInvalidated) && !strings.Contains(err.Error(), "pg_drop_replication_slot('s')") {
				t.Errorf("no recovery advice in %q", err)
			}
		})
	}
}

func TestValidSlotName(t *testing.T) {
	for name, want := range map[string]bool{
		"pgimageai": true, "slot_1": true, strings.Repeat("a", 63): true,
		"": false, "Slot": false, "a-b": false, "a b": false, "x'; DROP": false, strings.Repeat("a", 64): false,
	} {
		if got := ValidSlotName(name); got != want {
			t.Errorf("ValidSlotName(%q) = %t", name, got)
		}
	}
}
