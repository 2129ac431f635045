package pgconnect

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseConfigPins(t *testing.T) {
	tests := []struct {
		name string
		dsn  string
	}{
		{name: "plain", dsn: "postgres://u@h/db"},
		{name: "search_path in options", dsn: "postgres://u@h/db?options=-c%20search_path%3Dpublic"},
		{name: "search_path as a parameter", dsn: "host=h user=u dbname=db search_path=public row_security=on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := ParseConn(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			for _, params := range []map[string]string{cfg.RuntimeParams, conn.RuntimeParams} {
				if got := params["search_path"]; got != "pg_catalog, pg_temp" {
					t.Errorf("search_path = %q, want pg_catalog, pg_temp", got)
				}
				if got := params["row_security"]; got != "off" {
					t.Errorf("row_security = %q, want off", got)
				}
			}
		})
	}
}

func TestParseConfigError(t *testing.T) {
	if _, err := ParseConfig("postgres://u@h:notaport/db"); err == nil {
		t.Fatal("want an error for a bad port")
	}
	if _, err := ParseConn("postgres://u@h:notaport/db"); err == nil {
		t.Fatal("want an error for a bad port")
	}
}

// TestNoOtherConnections fails when product code outside this package parses
// a connection string or connects by itself: such a connection would not pin
// the session settings. Tests and the integration harness may.
func TestNoOtherConnections(t *testing.T) {
	banned := regexp.MustCompile(`\b(pgx\.Connect|pgx\.ParseConfig|pgconn\.Connect|pgconn\.ParseConfig|pgxpool\.New|pgxpool\.ParseConfig|pgx\.ParseConfigWithOptions|pgconn\.ParseConfigWithOptions)\(`)
	root := filepath.Join("..", "..")
	self, _ := filepath.Abs(".")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			abs, _ := filepath.Abs(path)
			if abs == self || d.Name() == "integration" || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if banned.MatchString(line) {
				found = append(found, path+":"+strings.TrimSpace(line)+fmt.Sprintf(" (line %d)", i+1))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("connects without pgconnect: %s", f)
	}
}
