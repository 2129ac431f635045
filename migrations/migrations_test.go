package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestAllEmbedded(t *testing.T) {
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("migrations = %+v, want version 1 first", ms)
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Version <= ms[i-1].Version {
			t.Fatalf("versions out of order: %d after %d", ms[i].Version, ms[i-1].Version)
		}
	}
	for _, table := range []string{"pgimageai.models", "pgimageai.rules", "pgimageai.errors", "pgimageai.checkpoints"} {
		if !strings.Contains(ms[0].SQL, "CREATE TABLE "+table) {
			t.Errorf("0001 does not create %s", table)
		}
	}
}

func TestLoad(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name     string
		fs       fstest.MapFS
		versions []int
		wantErr  string
	}{
		{"ordered", fstest.MapFS{"d/0002_b.sql": file("B"), "d/0001_a.sql": file("A"), "d/README": file("x")}, []int{1, 2}, ""},
		{"duplicate version", fstest.MapFS{"d/0001_a.sql": file("A"), "d/1_b.sql": file("B")}, nil, "share version 1"},
		{"no version", fstest.MapFS{"d/init.sql": file("A")}, nil, "NNNN_description.sql"},
		{"no name", fstest.MapFS{"d/0003_.sql": file("A")}, nil, "NNNN_description.sql"},
		{"zero version", fstest.MapFS{"d/0000_a.sql": file("A")}, nil, "NNNN_description.sql"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := load(tc.fs, "d")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tc.versions) || got[0] != tc.versions[0] || got[1] != tc.versions[1] {
				t.Fatalf("versions = %v, want %v", got, tc.versions)
			}
		})
	}
}
