package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{"defaults", nil, nil, config{Slot: "pgimageai", Publication: "pgimageai", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "268435456"}, ""},
		{"env", nil, map[string]string{"PGIMAGEAI_DSN": "postgres://a/b", "PGIMAGEAI_SLOT": "s1", "PGIMAGEAI_LOG_FORMAT": "json"},
			config{DSN: "postgres://a/b", Slot: "s1", Publication: "pgimageai", LogFormat: "json", ByteBudget: 256 << 20, byteBudget: "268435456"}, ""},
		{"flag beats env", []string{"--slot", "s2", "--target-dsn=postgres://t/db"}, map[string]string{"PGIMAGEAI_SLOT": "s1"},
			config{TargetDSN: "postgres://t/db", Slot: "s2", Publication: "pgimageai", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "268435456"}, ""},
		{"byte budget", []string{"--byte-budget", "67108864"}, nil, config{Slot: "pgimageai", Publication: "pgimageai", LogFormat: "text", ByteBudget: 64 << 20, byteBudget: "67108864"}, ""},
		{"byte budget too small", []string{"--byte-budget", "10"}, nil, config{}, "--byte-budget must be"},
		{"bad log format", []string{"--log-format", "xml"}, nil, config{}, "--log-format must be text or json"},
		{"unknown flag", []string{"--nope"}, nil, config{}, "flag provided but not defined"},
		{"stray argument", []string{"extra"}, nil, config{}, `unexpected argument "extra"`},
		{"key variables by flag", []string{"--key-env-allow", "OPENAI_API_KEY,*_API_KEY"}, nil,
			config{Slot: "pgimageai", Publication: "pgimageai", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "268435456", keyEnvAllow: "OPENAI_API_KEY,*_API_KEY"}, ""},
		{"key variables by env", nil, map[string]string{"PGIMAGEAI_KEY_ENV_ALLOW": "JINA_KEY"},
			config{Slot: "pgimageai", Publication: "pgimageai", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "268435456", keyEnvAllow: "JINA_KEY"}, ""},
		{"bad key variable pattern", []string{"--key-env-allow", "A,[B"}, nil, config{}, `--key-env-allow: key variable pattern "[B"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig("migrate", tc.args, env(tc.env), &bytes.Buffer{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.KeyEnv == nil || got.KeyEnv.String() != tc.want.keyEnvAllow {
				t.Fatalf("key variables %v, %v; want %q", got.KeyEnv, err, tc.want.keyEnvAllow)
			}
			got.KeyEnv = nil
			if got != tc.want {
				t.Fatalf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		env         map[string]string
		code        int
		out, errOut string
	}{
		{"no args", nil, nil, exitUsage, "", "Usage:"},
		{"help", []string{"--help"}, nil, exitOK, "migrate", ""},
		{"unknown command", []string{"frobnicate"}, nil, exitUsage, "", `unknown command "frobnicate"`},
		{"command help", []string{"migrate", "-h"}, nil, exitOK, "", "PGIMAGEAI_DSN"},
		{"bad flag", []string{"migrate", "--bogus"}, nil, exitUsage, "", "flag provided but not defined"},
		{"metrics address not an address", []string{"run", "--metrics-addr", "no-port-here"}, nil, exitUsage, "", "--metrics-addr"},
		{"bad dsn is usage", []string{"migrate", "--dsn", "postgres://u:hunter2@[::1"}, nil, exitUsage, "", "source dsn"},
		{"unreachable database", []string{"migrate", "--dsn", "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2"}, nil, exitFailure, "", "connect to source database u@127.0.0.1:1/db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, env(tc.env), &out, &errOut)
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
