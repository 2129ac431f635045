package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/bridge"
)

func TestRecoverSlotCommandLine(t *testing.T) {
	healthy := usageError{fmt.Errorf("%w: slot s can stream", bridge.ErrSlotHealthy)}
	if !errors.Is(healthy, errUsage) || !errors.Is(healthy, bridge.ErrSlotHealthy) || strings.Contains(healthy.Error(), "usage") {
		t.Errorf("usageError %q: want exit code 2 and the message alone", healthy)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"recover-slot", "--help"}, env(nil), &out, &errOut); code != exitOK {
		t.Fatalf("recover-slot --help: exit %d", code)
	}
	for _, want := range []string{"-force", "invalidated", "backfill", "deletes the target rows whose source row no longer exists"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("recover-slot --help lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	run(context.Background(), []string{"--help"}, env(nil), &out, &errOut)
	if !strings.Contains(out.String(), "recover-slot") {
		t.Errorf("usage lacks recover-slot:\n%s", out.String())
	}
	// --force belongs to recover-slot alone.
	if code := run(context.Background(), []string{"status", "--force"}, env(nil), &out, &errOut); code != exitUsage {
		t.Errorf("status --force: exit %d, want %d", code, exitUsage)
	}
}
