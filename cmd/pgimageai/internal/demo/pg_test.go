package demo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePostgresVersion(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		version   string
		major     int
		wantFound bool
	}{
		{"debian", "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)\n", "15.14", 15, true},
		{"plain", "postgres (PostgreSQL) 17.2\n", "17.2", 17, true},
		{"beta", "postgres (PostgreSQL) 18beta1\n", "18beta1", 18, true},
		{"old", "postgres (PostgreSQL) 9.6.24\n", "9.6.24", 9, true},
		{"garbage", "bash: postgres: command not found", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, major, ok := parsePostgresVersion(tc.in)
			if v != tc.version || major != tc.major || ok != tc.wantFound {
				t.Errorf("got %q %d %v, want %q %d %v", v, major, ok, tc.version, tc.major, tc.wantFound)
			}
		})
	}
}

func TestFindPostgres(t *testing.T) {
	root := t.TempDir()
	dir := func(name string, bins ...string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, b := range bins {
			if err := os.WriteFile(filepath.Join(d, b), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	v9, v14, v15, v16 := dir("9", "initdb", "postgres"), dir("14", "initdb", "postgres"), dir("15", "initdb", "postgres"), dir("16", "initdb", "postgres")
	clientOnly, bad := dir("client", "postgres"), dir("bad", "initdb", "postgres")
	versions := map[string]string{v9: "9.6.24", v14: "14.10", v15: "15.14", v16: "16.1", bad: ""}
	version := func(d string) (string, error) {
		if versions[d] == "" {
			return "", errors.New("exec failed")
		}
		return "postgres (PostgreSQL) " + versions[d] + "\n", nil
	}
	tests := []struct {
		name    string
		dirs    []string
		want    string
		wantErr string
	}{
		{"newest wins", []string{v14, v16, v15, v9}, "16.1", ""},
		{"duplicates and empties", []string{"", v15, v15}, "15.14", ""},
		{"client only and broken skipped", []string{clientOnly, bad, v14}, "14.10", ""},
		{"none", []string{clientOnly, filepath.Join(root, "missing")}, "", "apt-get install postgresql"},
		{"too old", []string{v9}, "", "needs 14 or later"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findPostgres(tc.dirs, version)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Version != tc.want {
				t.Fatalf("got %+v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestServerEnv(t *testing.T) {
	got := serverEnv([]string{"PATH=/bin", "PGDATA=/x", "PGHOST=h", "LANG=de_DE.UTF-8", "LC_MESSAGES=de", "HOME=/root"})
	want := "LC_ALL=C PATH=/bin HOME=/root"
	if strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestDemoServerMode(t *testing.T) {
	tests := []struct {
		value, want, wantErr string
	}{
		{"", "auto", ""},
		{"auto", "auto", ""},
		{"local", "local", ""},
		{"docker", "docker", ""},
		{"podman", "", "must be auto, local or docker"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, err := demoServerMode(func(string) string { return tt.value })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUsage) {
					t.Fatalf("demoServerMode(%q) = %q, %v; want a usage error %q", tt.value, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("demoServerMode(%q) = %q, %v; want %q", tt.value, got, err, tt.want)
			}
		})
	}
}
