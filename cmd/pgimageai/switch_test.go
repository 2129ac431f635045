package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestParseSwitchFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    queryFlags
		wantErr string
	}{
		{"list", nil, queryFlags{Format: "table"}, ""},
		{"list one rule as json", []string{"--rule", "embed", "--format", "json"}, queryFlags{Format: "json", Rule: "embed"}, ""},
		{"force", []string{"--rule", "embed", "--force"}, queryFlags{Format: "table", Rule: "embed", Force: true}, ""},
		{"abort", []string{"--rule=embed", "--abort"}, queryFlags{Format: "table", Rule: "embed", Abort: true}, ""},
		{"both", []string{"--rule", "embed", "--force", "--abort"}, queryFlags{}, "--force and --abort: give one of them"},
		{"force without a rule", []string{"--force"}, queryFlags{}, "--force needs --rule"},
		{"abort without a rule", []string{"--abort"}, queryFlags{}, "--abort needs --rule"},
		{"force as json", []string{"--rule", "embed", "--force", "--format", "json"}, queryFlags{}, "--format is for the list of switches"},
		{"bad format", []string{"--format", "yaml"}, queryFlags{}, `--format must be table or json, got "yaml"`},
		{"no reason", []string{"--reason", "provider_error"}, queryFlags{}, "unknown flag --reason"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig("switch", tc.args, env(nil), &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Query != tc.want {
				t.Fatalf("got %+v, want %+v", got.Query, tc.want)
			}
		})
	}
}

func TestSwitchExitCodes(t *testing.T) {
	const unreachable = "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2"
	tests := []struct {
		name   string
		args   []string
		code   int
		errOut string
	}{
		{"help", []string{"help", "switch"}, exitOK, ""},
		{"both", []string{"switch", "--dsn", unreachable, "--rule", "embed", "--force", "--abort"}, exitUsage, "give one of them"},
		{"force without a rule", []string{"switch", "--dsn", unreachable, "--force"}, exitUsage, "--force needs --rule"},
		{"no database", []string{"switch"}, exitUsage, "no database to connect to"},
		{"force, target unreachable", []string{"switch", "--dsn", "postgres://x@127.0.0.1:2/src", "--target-dsn", unreachable, "--rule", "embed", "--force"},
			exitFailure, "connect to target database u@127.0.0.1:1/db"},
		{"list, source unreachable", []string{"switch", "--dsn", unreachable}, exitFailure, "connect to source database u@127.0.0.1:1/db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, env(nil), &out, &errOut)
			if code != tc.code || !strings.Contains(errOut.String(), tc.errOut) {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, errOut.String(), tc.code, tc.errOut)
			}
			if strings.Contains(out.String()+errOut.String(), "hunter2") {
				t.Fatalf("password leaked: %s", errOut.String())
			}
		})
	}
}
