package logsum

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestSampled(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	s := &Sampled{Every: time.Minute, Now: func() time.Time { return now }}
	for range 5 {
		s.Log(log, slog.LevelWarn, "rule a", "a row gets the synchronous call", "rule", "a")
	}
	s.Log(log, slog.LevelWarn, "rule b", "a row gets the synchronous call", "rule", "b")
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("%d lines for 6 occurrences of two keys within a minute, want 2:\n%s", n, buf.String())
	}
	now = now.Add(61 * time.Second)
	s.Log(log, slog.LevelWarn, "rule a", "a row gets the synchronous call", "rule", "a")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "more=4") {
		t.Fatalf("the line after the interval should say the 4 held back:\n%s", buf.String())
	}
	// Keys are bounded: past maxKeys the expired ones go.
	for i := range maxKeys + 10 {
		s.Log(log, slog.LevelWarn, string(rune(i+1000)), "x")
	}
	if len(s.keys) > maxKeys {
		t.Fatalf("%d keys remembered, want at most %d", len(s.keys), maxKeys)
	}
}
