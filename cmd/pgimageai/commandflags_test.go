package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestParseCommandFlags(t *testing.T) {
	tests := []struct {
		name    string
		cmd     string
		args    []string
		want    queryFlags
		wantErr string
	}{
		{"status defaults", "status", nil, queryFlags{Format: "table"}, ""},
		{"status json", "status", []string{"--format", "json"}, queryFlags{Format: "json"}, ""},
		{"status bad format", "status", []string{"--format=xml"}, queryFlags{}, `--format must be table or json, got "xml"`},
		{"status has no filters", "status", []string{"--rule", "r"}, queryFlags{}, "unknown flag --rule"},
		{"errors defaults", "errors", nil, queryFlags{Format: "table", Limit: 50}, ""},
		{"errors filters", "errors", []string{"--rule", "caption", "--reason", "provider_error", "--limit", "0", "--format", "json"},
			queryFlags{Format: "json", Rule: "caption", Reason: "provider_error"}, ""},
		{"errors invalid_rule", "errors", []string{"--reason", "invalid_rule"}, queryFlags{Format: "table", Reason: "invalid_rule", Limit: 50}, ""},
		{"errors unknown reason", "errors", []string{"--reason", "empty"}, queryFlags{}, `--reason must be one of empty_image, unknown_format, too_large, unsupported_format, provider_error, bad_response, budget_exhausted, invalid_rule, target_refused, got "empty"`},
		{"errors negative limit", "errors", []string{"--limit", "-1"}, queryFlags{}, "--limit must be 0 (all) or more, got -1"},
		{"errors limit not a number", "errors", []string{"--limit", "ten"}, queryFlags{}, `invalid value "ten" for flag -limit`},
		{"retry defaults", "retry", nil, queryFlags{}, ""},
		{"retry filters", "retry", []string{"--rule=caption", "--reason=empty_image"}, queryFlags{Rule: "caption", Reason: "empty_image"}, ""},
		{"retry invalid_rule", "retry", []string{"--reason", "invalid_rule"}, queryFlags{}, "an invalid rule is fixed by editing it in pgimageai.rules, not retried"},
		{"retry has no format", "retry", []string{"--format", "json"}, queryFlags{}, "unknown flag --format"},
		{"migrate has none", "migrate", []string{"--limit", "5"}, queryFlags{}, "unknown flag --limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.cmd, tc.args, env(map[string]string{"PGIMAGEAI_SLOT": "s1"}), &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Query != tc.want || got.Slot != "s1" {
				t.Fatalf("got %+v (slot %q), want %+v", got.Query, got.Slot, tc.want)
			}
		})
	}
}

func TestReadCommandsExitCodes(t *testing.T) {
	const unreachable = "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2"
	tests := []struct {
		name        string
		args        []string
		code        int
		out, errOut string
	}{
		{"usage lists them", []string{"help"}, exitOK, "status        slot, confirmed LSN", ""},
		{"status help", []string{"status", "-h"}, exitOK, "-format", ""},
		{"errors help", []string{"errors", "--help"}, exitOK, "-limit", ""},
		{"status bad format", []string{"status", "--format", "yaml"}, exitUsage, "", "--format must be table or json"},
		{"errors bad reason", []string{"errors", "--reason", "nope"}, exitUsage, "", "--reason must be one of"},
		{"retry invalid_rule", []string{"retry", "--reason", "invalid_rule"}, exitUsage, "", "not retried"},
		{"status bad dsn", []string{"status", "--dsn", "postgres://u:hunter2@[::1"}, exitUsage, "", "--dsn cannot be parsed"},
		{"status unreachable", []string{"status", "--dsn", unreachable}, exitFailure, "", "connect to source database u@127.0.0.1:1/db"},
		{"errors unreachable target", []string{"errors", "--dsn", "postgres://x@127.0.0.1:2/src", "--target-dsn", unreachable}, exitFailure, "", "connect to target database u@127.0.0.1:1/db"},
		{"retry unreachable", []string{"retry", "--dsn", unreachable}, exitFailure, "", "connect to source database u@127.0.0.1:1/db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, env(nil), &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errOut.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errOut) {
				t.Fatalf("stdout %q stderr %q; want %q / %q", out.String(), errOut.String(), tc.out, tc.errOut)
			}
			if strings.Contains(out.String()+errOut.String(), "hunter2") {
				t.Fatalf("password leaked: %s", errOut.String())
			}
		})
	}
}
