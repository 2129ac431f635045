package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestHelpMatchesFlags: `pgimageai help CMD` says what the command does and
// lists exactly the flags it accepts — its own, and the global flags it
// takes under "Global flags" — and the top-level help names every command
// and every global flag.
func TestHelpMatchesFlags(t *testing.T) {
	var c config
	for _, cmd := range commandOrder {
		t.Run(cmd, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), []string{"help", cmd}, env(nil), &out, &errOut); code != exitOK {
				t.Fatalf("help %s: exit %d: %s", cmd, code, errOut.String())
			}
			help := out.String()
			first, _, _ := strings.Cut(about[cmd], "\n")
			if first == "" || !strings.Contains(help, first) {
				t.Errorf("help %s does not say what it does (%q):\n%s", cmd, first, help)
			}
			rest, global, _ := strings.Cut(help, "\nGlobal flags:\n")
			_, own, _ := strings.Cut(rest, "\nFlags:\n")
			for _, s := range c.settings() {
				listed := strings.Contains(global, "--"+s.flag+" ")
				if listed != takes(cmd, s.flag) {
					t.Errorf("help %s: global flag --%s listed %v, taken %v", cmd, s.flag, listed, takes(cmd, s.flag))
				}
				if strings.Contains(own, "--"+s.flag+" ") {
					t.Errorf("help %s: global flag --%s listed among the command's own", cmd, s.flag)
				}
			}
			// The command's own flags, as the command defines them.
			fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var q queryFlags
			defineCommandFlags(cmd, fs, &q)
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(own, "--"+f.Name+" ") {
					t.Errorf("help %s does not list its flag --%s:\n%s", cmd, f.Name, help)
				}
			})
			// A global flag the command does not take is refused.
			for _, s := range c.settings() {
				if takes(cmd, s.flag) {
					continue
				}
				if _, err := parseConfig(cmd, []string{"--" + s.flag, "x"}, env(nil), io.Discard); err == nil {
					t.Errorf("%s accepted --%s, which it does not take", cmd, s.flag)
				}
			}
		})
	}
	top := usage()
	for _, cmd := range commandOrder {
		if !strings.Contains(top, "\n  "+cmd+" ") {
			t.Errorf("the top-level help does not list %s", cmd)
		}
	}
	for _, s := range c.settings() {
		if !strings.Contains(top, "--"+s.flag+" ") || !strings.Contains(top, s.env) {
			t.Errorf("the top-level help does not list --%s / %s", s.flag, s.env)
		}
	}
	if len(commandOrder) != len(commands) {
		t.Errorf("%d commands, %d in the help's order", len(commands), len(commandOrder))
	}
}

func TestHelpAndVersion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"version", []string{"--version"}, exitOK, "pgimageai "},
		{"help of an unknown command", []string{"help", "frobnicate"}, exitUsage, ""},
		{"help alone", []string{"help"}, exitOK, "Commands:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tc.args, env(nil), &out, &errOut); code != tc.code || !strings.Contains(out.String(), tc.out) {
				t.Fatalf("exit %d, stdout %q; want %d, %q", code, out.String(), tc.code, tc.out)
			}
		})
	}
}
