package replication

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckPreflight(t *testing.T) {
	tests := []struct {
		name       string
		version    int
		walLevel   string
		super, rep bool
		wantErr    error
		advice     string
	}{
		{name: "ok replication role", version: 170002, walLevel: "logical", rep: true},
		{name: "ok superuser", version: 140000, walLevel: "logical", super: true},
		{name: "old server", version: 130011, walLevel: "logical", super: true, wantErr: ErrVersion, advice: "14"},
		{name: "wal_level replica", version: 150000, walLevel: "replica", super: true, wantErr: ErrWALLevel, advice: "wal_level = logical"},
		{name: "no replication", version: 150000, walLevel: "logical", wantErr: ErrPrivilege, advice: `ALTER ROLE "Bob" REPLICATION`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPreflight(tt.version, tt.walLevel, "Bob", tt.super, tt.rep)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.advice) {
				t.Errorf("%q lacks %q", err, tt.advice)
			}
		})
	}
}
