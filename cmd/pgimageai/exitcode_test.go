package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgimageai/pgimageai/replication"
)

// TestEveryCommandsUsagePaths walks every command: its help goes to stdout
// with exit 0, and each usage error is written once, to stderr, with exit 2.
func TestEveryCommandsUsagePaths(t *testing.T) {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				args    []string
				code    int
				out     string
				errLine string // the one line of stderr
			}{
				{"--help", []string{name, "--help"}, exitOK, "Usage: pgimageai " + name, ""},
				{"-h", []string{name, "-h"}, exitOK, "Usage: pgimageai " + name, ""},
				{"help command", []string{"help", name}, exitOK, "Usage: pgimageai " + name, ""},
				{"unknown flag", []string{name, "--no-such-flag"}, exitUsage, "", "unknown flag --no-such-flag; run 'pgimageai help " + name + "' for its flags"},
				{"stray argument", []string{name, "stray"}, exitUsage, "", `unexpected argument "stray"`},
				{"flag without its value", append([]string{name}, lastFlag(t, name)), exitUsage, "", "flag needs an argument"},
			} {
				if tc.args[len(tc.args)-1] == "" {
					continue // the command has no flag that takes a value
				}
				var out, errOut bytes.Buffer
				code := run(context.Background(), tc.args, env(nil), &out, &errOut)
				if code != tc.code {
					t.Fatalf("%s: exit %d, want %d; stderr %q", tc.name, code, tc.code, errOut.String())
				}
				if !strings.Contains(out.String(), tc.out) {
					t.Fatalf("%s: stdout %q, want %q", tc.name, out.String(), tc.out)
				}
				if tc.code == exitOK {
					if errOut.Len() != 0 {
						t.Fatalf("%s: stderr %q, want nothing", tc.name, errOut.String())
					}
					continue
				}
				if out.Len() != 0 {
					t.Fatalf("%s: stdout %q, want nothing", tc.name, out.String())
				}
				if lines := strings.Count(errOut.String(), "\n"); lines != 1 || !strings.Contains(errOut.String(), tc.errLine) {
					t.Fatalf("%s: stderr %q (%d lines), want one line with %q", tc.name, errOut.String(), lines, tc.errLine)
				}
			}
		})
	}
}

// lastFlag is a flag of cmd that takes a value, given without one; "" when it
// has none.
func lastFlag(t *testing.T, cmd string) string {
	t.Helper()
	for _, s := range (&config{}).settings() {
		if takes(cmd, s.flag) {
			return "--" + s.flag
		}
	}
	return ""
}

// TestCommandFlagErrors are the errors of each command's own flags: exit 2,
// one line, and the nearest value where one was misspelt.
func TestCommandFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"status format", []string{"status", "--format", "xml"}, "--format must be table or json"},
		{"errors limit", []string{"errors", "--limit", "-1"}, "--limit must be 0 (all) or more"},
		{"errors reason", []string{"errors", "--reason", "too-large"}, "--reason must be one of"},
		{"retry invalid_rule", []string{"retry", "--reason", "invalid_rule"}, "fixed by editing it"},
		{"switch force without rule", []string{"switch", "--force"}, "--force needs --rule"},
		{"switch force and abort", []string{"switch", "--rule", "r", "--force", "--abort"}, "give one of them"},
		{"estimate without rule", []string{"estimate"}, "--rule is required"},
		{"health probe", []string{"health", "--probe", "readyz"}, "--probe must be ready, live or leader"},
		{"run byte budget", []string{"run", "--byte-budget", "12"}, "--byte-budget must be at least 1MiB"},
		{"run log format", []string{"run", "--log-format", "yaml"}, "--log-format must be text or json"},
		{"run group", []string{"run", "--group", "Bad Group"}, "--group must be 1 to 40"},
		{"misspelt flag", []string{"errors", "--limt", "3"}, "unknown flag --limt (did you mean --limit?)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, env(map[string]string{"PGIMAGEAI_DSN": "postgres://u@127.0.0.1:1/db"}), &out, &errOut)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, errOut.String())
			}
			if strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("stderr %q, want one line with %q", errOut.String(), tc.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("connect: %w", &pgconn.PgError{Code: code}) }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, exitOK},
		{"usage", fmt.Errorf("%w: --x", errUsage), exitUsage},
		{"password refused", pg("28P01"), exitUsage},
		{"no pg_hba entry", pg("28000"), exitUsage},
		{"no such database", pg("3D000"), exitUsage},
		{"privilege", pg("42501"), exitUsage},
		{"wal_level", fmt.Errorf("preflight: %w", replication.ErrWALLevel), exitUsage},
		{"replication privilege", fmt.Errorf("preflight: %w", replication.ErrPrivilege), exitUsage},
		{"too old", fmt.Errorf("preflight: %w", replication.ErrVersion), exitUsage},
		{"too many connections is runtime", pg("53300"), exitFailure},
		{"server shutting down is runtime", pg("57P01"), exitFailure},
		{"refused connection is runtime", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), exitFailure},
		{"slot invalidated is runtime", replication.ErrSlotInvalidated, exitFailure},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Fatalf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
