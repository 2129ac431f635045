package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// flat is a config with its groups flattened, for the table of
// TestParseConfig.
type flat struct {
	DSN, TargetDSN, Group, Slot, Publication string
	MetricsAddr, PprofAddr, LogFormat        string
	ByteBudget                               int64
	StallAfter, FailoverWait, Revalidate     time.Duration
	ReadColumns                              bool
	ProbeMax                                 time.Duration
	Query                                    queryFlags
	Console                                  consoleSettings
	byteBudget, stallAfter, failoverWait     string
	revalidate, publishCols, probeMax        string
	keyEnvAllow, trustTables                 string
}

func flatten(c config) flat {
	return flat{
		DSN: c.DSN, TargetDSN: c.TargetDSN, Group: c.Group, Slot: c.Slot, Publication: c.Publication,
		MetricsAddr: c.MetricsAddr, PprofAddr: c.PprofAddr, LogFormat: c.LogFormat,
		ByteBudget: c.ByteBudget, StallAfter: c.StallAfter, FailoverWait: c.FailoverWait, Revalidate: c.Revalidate,
		ReadColumns: c.ReadColumns, ProbeMax: c.ProbeMax, Query: c.Query, Console: c.Console,
		byteBudget: c.given.byteBudget, stallAfter: c.given.stallAfter, failoverWait: c.given.failoverWait,
		revalidate: c.given.revalidate, publishCols: c.given.publishCols, probeMax: c.given.probeMax,
		keyEnvAllow: c.given.keyEnvAllow, trustTables: c.given.trustTables,
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    flat
		wantErr string
	}{
		{"defaults", nil, nil, flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"env", nil, map[string]string{"PGIMAGEAI_DSN": "postgres://a/b", "PGIMAGEAI_SLOT": "s1", "PGIMAGEAI_LOG_FORMAT": "json"},
			flat{DSN: "postgres://a/b", Slot: "s1", Publication: "pgimageai", Group: "default", LogFormat: "json", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"flag beats env", []string{"--slot", "s2", "--target-dsn=postgres://t/db"}, map[string]string{"PGIMAGEAI_SLOT": "s1"},
			flat{TargetDSN: "postgres://t/db", Slot: "s2", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"byte budget", []string{"--byte-budget", "67108864"}, nil, flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 64 << 20, byteBudget: "67108864"}, ""},
		{"byte budget with a unit", []string{"--byte-budget", "1.5GiB"}, nil, flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 3 << 29, byteBudget: "1.5GiB"}, ""},
		{"byte budget from env with a unit", nil, map[string]string{"PGIMAGEAI_BYTE_BUDGET": "64Mi"}, flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 64 << 20, byteBudget: "64Mi"}, ""},
		{"another group", []string{"--group", "thumbs"}, nil,
			flat{Slot: "pgimageai_thumbs", Publication: "pgimageai_thumbs", Group: "thumbs", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"another group, own slot", []string{"--slot", "s9"}, map[string]string{"PGIMAGEAI_GROUP": "thumbs"},
			flat{Slot: "s9", Publication: "pgimageai_thumbs", Group: "thumbs", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"bad group", []string{"--group", "Thumbs;drop"}, nil, flat{}, "--group must be 1 to 40 of a-z, 0-9 and _"},
		{"byte budget too small", []string{"--byte-budget", "10"}, nil, flat{}, "--byte-budget must be at least 1MiB"},
		{"byte budget bad unit", []string{"--byte-budget", "256MeB"}, nil, flat{}, "is not a size"},
		{"bad log format", []string{"--log-format", "xml"}, nil, flat{}, "--log-format must be text or json"},
		{"unknown flag", []string{"--nope"}, nil, flat{}, "unknown flag --nope; run 'pgimageai help run' for its flags"},
		{"misspelt flag", []string{"--byte-budgte", "1GiB"}, nil, flat{}, "unknown flag --byte-budgte (did you mean --byte-budget?)"},
		{"stray argument", []string{"extra"}, nil, flat{}, `unexpected argument "extra"`},
		{"key variables by flag", []string{"--key-env-allow", "OPENAI_API_KEY,*_API_KEY"}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", keyEnvAllow: "OPENAI_API_KEY,*_API_KEY"}, ""},
		{"key variables by env", nil, map[string]string{"PGIMAGEAI_KEY_ENV_ALLOW": "JINA_KEY"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", keyEnvAllow: "JINA_KEY"}, ""},
		{"bad key variable pattern", []string{"--key-env-allow", "A,[B"}, nil, flat{}, `--key-env-allow: key variable pattern "[B"`},
		{"pprof on loopback", []string{"--pprof-addr", "127.0.0.1:6060"}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", PprofAddr: "127.0.0.1:6060", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"pprof on loopback, by env", nil, map[string]string{"PGIMAGEAI_PPROF_ADDR": "127.0.0.2:0"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", PprofAddr: "127.0.0.2:0", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"pprof on localhost: a name, not an address", []string{"--pprof-addr", "localhost:6060"}, nil, flat{}, "is not a loopback address"},
		{"pprof on IPv6 loopback", []string{"--pprof-addr", "[::1]:6060"}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", PprofAddr: "[::1]:6060", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB"}, ""},
		{"pprof on every interface", []string{"--pprof-addr", ":6060"}, nil, flat{}, "is not a loopback address"},
		{"pprof on a public address", []string{"--pprof-addr", "0.0.0.0:6060"}, nil, flat{}, "is not a loopback address"},
		{"pprof on a host name", []string{"--pprof-addr", "example.com:6060"}, nil, flat{}, "is not a loopback address"},
		{"pprof without a port", []string{"--pprof-addr", "127.0.0.1"}, nil, flat{}, "--pprof-addr"},
		{"stall after", []string{"--stall-after", "90s"}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", StallAfter: 90 * time.Second, stallAfter: "90s"}, ""},
		{"stall after 0 is never", nil, map[string]string{"PGIMAGEAI_STALL_AFTER": "0"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", StallAfter: -1, stallAfter: "0"}, ""},
		{"bad stall after", []string{"--stall-after", "ten minutes"}, nil, flat{}, "--stall-after must be a duration"},
		{"negative stall after", []string{"--stall-after", "-1m"}, nil, flat{}, "--stall-after must be a duration"},
		{"failover wait", nil, map[string]string{"PGIMAGEAI_FAILOVER_WAIT": "90s"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", FailoverWait: 90 * time.Second, failoverWait: "90s"}, ""},
		{"console of run, its token from the default variable", []string{"--console-addr", "127.0.0.1:0", "--console-allow-retry"}, map[string]string{"PGIMAGEAI_CONSOLE_TOKEN": "tok-0123456789abcdef"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB",
				Query: queryFlags{AllowRetry: true}, Console: consoleSettings{Addr: "127.0.0.1:0", TokenEnv: "PGIMAGEAI_CONSOLE_TOKEN", token: "tok-0123456789abcdef"}}, ""},
		{"console token from a named variable", []string{"--console-token-env", "MY_TOKEN"}, map[string]string{"MY_TOKEN": "mine-0123456789abcdef", "PGIMAGEAI_CONSOLE_TOKEN": "not this one"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB",
				Console: consoleSettings{TokenEnv: "MY_TOKEN", token: "mine-0123456789abcdef"}}, ""},
		{"trusted write-back tables", []string{"--trust-tables", "public.photos, \"My Table\""}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", trustTables: `public.photos, "My Table"`}, ""},
		{"zero failover wait", []string{"--failover-wait", "0"}, nil, flat{}, "--failover-wait must be a positive duration"},
		{"revalidate interval", nil, map[string]string{"PGIMAGEAI_REVALIDATE_INTERVAL": "2s"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", Revalidate: 2 * time.Second, revalidate: "2s"}, ""},
		{"only the columns rules read", []string{"--publish-columns", "read"}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", ReadColumns: true, publishCols: "read"}, ""},
		{"bad publish columns", nil, map[string]string{"PGIMAGEAI_PUBLISH_COLUMNS": "some"}, flat{}, "--publish-columns must be all or read"},
		{"zero revalidate interval", []string{"--revalidate-interval", "0"}, nil, flat{}, "--revalidate-interval must be a duration from 100ms to 1h"},
		{"probe max", []string{"--probe-max", "5s"}, nil,
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", ProbeMax: 5 * time.Second, probeMax: "5s"}, ""},
		{"probe max by env", nil, map[string]string{"PGIMAGEAI_PROBE_MAX": "2m"},
			flat{Slot: "pgimageai", Publication: "pgimageai", Group: "default", LogFormat: "text", ByteBudget: 256 << 20, byteBudget: "256MiB", ProbeMax: 2 * time.Minute, probeMax: "2m"}, ""},
		{"probe max under a second", []string{"--probe-max", "500ms"}, nil, flat{}, "--probe-max must be a duration of at least 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig("run", tc.args, env(tc.env), &bytes.Buffer{})
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
			slotGiven := tc.env["PGIMAGEAI_SLOT"] != ""
			for _, a := range tc.args {
				slotGiven = slotGiven || a == "--slot"
			}
			if got.slotDefault == slotGiven {
				t.Fatalf("slotDefault %v with the slot given %v", got.slotDefault, slotGiven)
			}
			got.slotDefault = false
			if tc.want.stallAfter == "" {
				tc.want.StallAfter, tc.want.stallAfter = 10*time.Minute, "10m"
			}
			if tc.want.failoverWait == "" {
				tc.want.FailoverWait, tc.want.failoverWait = 5*time.Minute, "5m"
			}
			if tc.want.Console.TokenEnv == "" {
				tc.want.Console.TokenEnv = "PGIMAGEAI_CONSOLE_TOKEN"
			}
			if tc.want.revalidate == "" {
				tc.want.Revalidate, tc.want.revalidate = 5*time.Second, "5s"
			}
			if tc.want.publishCols == "" {
				tc.want.publishCols = "all"
			}
			if tc.want.probeMax == "" {
				tc.want.ProbeMax, tc.want.probeMax = 30*time.Second, "30s"
			}
			if flatten(got) != tc.want {
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
		{"command help", []string{"migrate", "-h"}, nil, exitOK, "PGIMAGEAI_DSN", ""},
		{"help of a command", []string{"help", "status"}, nil, exitOK, "Usage: pgimageai status", ""},
		{"help of an unknown command", []string{"help", "stauts"}, nil, exitUsage, "", `unknown command "stauts" (did you mean "status"?)`},
		{"misspelt command", []string{"stauts"}, nil, exitUsage, "", `unknown command "stauts" (did you mean "status"?)`},
		{"bad flag", []string{"migrate", "--bogus"}, nil, exitUsage, "", "unknown flag --bogus"},
		{"metrics address not an address", []string{"run", "--metrics-addr", "no-port-here"}, map[string]string{"PGIMAGEAI_DSN": "postgres://u@127.0.0.1:1/db"}, exitUsage, "", "--metrics-addr"},
		{"bad dsn is usage", []string{"migrate", "--dsn", "postgres://u:hunter2@[::1"}, nil, exitUsage, "", "--dsn cannot be parsed"},
		{"bad target dsn is usage", []string{"status", "--dsn", "postgres://u@127.0.0.1:1/db", "--target-dsn", "postgres://u:hunter2@h:notaport/db"}, nil, exitUsage, "", "--target-dsn cannot be parsed"},
		{"no dsn is usage", []string{"run"}, nil, exitUsage, "", "give --dsn, set PGIMAGEAI_DSN, or set the libpq variables"},
		{"no dsn for status either", []string{"status"}, nil, exitUsage, "", "no database to connect to"},
		{"libpq variables name the database", []string{"migrate"}, map[string]string{"PGHOST": "127.0.0.1", "PGPORT": "1", "PGCONNECT_TIMEOUT": "2"}, exitFailure, "", "connect to source"},
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

func TestTrustedWriteBack(t *testing.T) {
	tests := []struct {
		name, flag string
		want       []string
	}{
		{"none", "", nil},
		{"one", "public.photos", []string{"public.photos"}},
		{"several, spaces and empty entries", ` public.photos ,, "My Table" `, []string{"public.photos", `"My Table"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (config{given: givenSettings{trustTables: tt.flag}}).trustedTables(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
