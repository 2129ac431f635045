package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestConsoleFlags: the console listens on loopback unless told otherwise,
// only reads unless told otherwise, and reads its token from the variable
// --console-token-env names.
func TestConsoleFlags(t *testing.T) {
	for _, c := range []struct {
		name      string
		args      []string
		env       map[string]string
		wantAddr  string
		wantRetry bool
		wantToken string
	}{
		{"defaults", nil, map[string]string{"PGIMAGEAI_CONSOLE_TOKEN": "t-0123456789abcdef"}, "127.0.0.1:8080", false, "t-0123456789abcdef"},
		{"another address, retry", []string{"--addr", "127.0.0.1:9999", "--console-allow-retry"}, nil, "127.0.0.1:9999", true, ""},
		{"another variable", []string{"--console-token-env", "X_TOKEN"}, map[string]string{"X_TOKEN": "x-0123456789abcdef", "PGIMAGEAI_CONSOLE_TOKEN": "no"}, "127.0.0.1:8080", false, "x-0123456789abcdef"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseConfig("console", c.args, env(c.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got.Query.Addr != c.wantAddr || got.Query.AllowRetry != c.wantRetry || got.Console.token != c.wantToken {
				t.Fatalf("addr %q, retry %v, token %q; want %q, %v, %q", got.Query.Addr, got.Query.AllowRetry, got.Console.token, c.wantAddr, c.wantRetry, c.wantToken)
			}
		})
	}
}

// TestConsoleNeedsToken: without a token the console does not start (exit
// 2), and the message names the variable, never a value.
func TestConsoleNeedsToken(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"console", "--dsn", "postgres://u:secretpw@127.0.0.1:1/db", "--addr", "127.0.0.1:0"},
		env(map[string]string{"PGIMAGEAI_CONSOLE_TOKEN": "tooshort"}), &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "PGIMAGEAI_CONSOLE_TOKEN") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "tooshort") || strings.Contains(errOut.String(), "secretpw") {
		t.Fatalf("the message shows a secret: %s", errOut.String())
	}
}

// TestRunConsoleNeedsToken: run --console-addr checks the console's token
// before it connects anywhere.
func TestRunConsoleNeedsToken(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--dsn", "postgres://u@127.0.0.1:1/db", "--console-addr", "127.0.0.1:0"}, env(nil), &out, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "PGIMAGEAI_CONSOLE_TOKEN") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
