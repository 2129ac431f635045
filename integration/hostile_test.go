package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// Hostile identifiers: upper case, spaces, both kinds of quotes, semicolons
// and comment markers, and names that would drop public.canary if they were
// ever pasted into SQL unquoted.
const (
	hostileSchema = `Odd "Schema"; DROP`
	hostileTable  = `My 'Table'`
	hostileKey    = `Id "x"`
	hostileImage  = `Img; --`
	hostileNote   = `Note "n"; --`
	hostileTarget = `Tgt"; DROP TABLE public.canary; --`
	hostileColumn = `Cap'; DROP TABLE public.canary; --`
	hostileRule   = `r'; DROP TABLE public.canary; --`
	hostileModel  = `m"; DROP TABLE public.canary; --`
)

// The rules' table names, written as PostgreSQL writes a regclass.
const (
	hostileSourceName = `"Odd ""Schema""; DROP"."My 'Table'"`
	hostileTargetName = `"Odd ""Schema""; DROP"."Tgt""; DROP TABLE public.canary; --"`
)

// quoted returns a column name quoted for SQL.
func quoted(name string) string { return pgx.Identifier{name}.Sanitize() }

// hostileSource creates public.canary (one row) and the hostile source table
// ("Id ""x""" int primary key, "Img; --" bytea, "Note ""n""; --" text).
func hostileSource(t *testing.T, s *source) {
	t.Helper()
	s.exec(t, `CREATE TABLE public.canary (id int); INSERT INTO public.canary VALUES (42)`)
	s.exec(t, "CREATE SCHEMA "+quoted(hostileSchema))
	s.exec(t, fmt.Sprintf("CREATE TABLE %s (%s int PRIMARY KEY, %s bytea, %s text)",
		pgx.Identifier{hostileSchema, hostileTable}.Sanitize(), quoted(hostileKey), quoted(hostileImage), quoted(hostileNote)))
	var regclass string
	if err := s.conn.QueryRow(context.Background(), "SELECT $1::regclass::text", hostileSourceName).Scan(&regclass); err != nil || regclass != hostileSourceName {
		t.Fatalf("regclass of the source: %q, %v; want %q", regclass, err, hostileSourceName)
	}
}

// insertHostile inserts a row into the hostile source table.
func insertHostile(t *testing.T, s *source, id int, img []byte, note string) {
	t.Helper()
	s.exec(t, fmt.Sprintf("INSERT INTO %s (%s, %s, %s) VALUES ($1, $2, $3)", pgx.Identifier{hostileSchema, hostileTable}.Sanitize(),
		quoted(hostileKey), quoted(hostileImage), quoted(hostileNote)), id, img, note)
}

// assertCanary fails the test unless public.canary still exists, unchanged.
func assertCanary(t *testing.T, s *source) {
	t.Helper()
	var cols string
	err := s.conn.QueryRow(context.Background(), `SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = to_regclass('public.canary') AND attnum > 0 AND NOT attisdropped`).Scan(&cols)
	if err != nil || cols != "id" {
		t.Fatalf("public.canary has columns %q (%v); want it intact with column id", cols, err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.canary WHERE id = 42"); n != 1 {
		t.Fatalf("public.canary has lost its row")
	}
}

// hostileResults reads the hostile target table: key → result (nil = NULL).
func hostileResults(t *testing.T, s *source) map[int]*string {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), fmt.Sprintf("SELECT %s, %s FROM %s",
		quoted(hostileKey), quoted(hostileColumn), pgx.Identifier{hostileSchema, hostileTarget}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]*string{}
	for rows.Next() {
		var k int
		var v *string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func assertResults(t *testing.T, got map[int]*string, want map[int]*string) {
	t.Helper()
	str := func(v *string) string {
		if v == nil {
			return "NULL"
		}
		return *v
	}
	if len(got) != len(want) {
		t.Errorf("target has %d rows, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("target row %d missing", k)
		case str(g) != str(w):
			t.Errorf("target row %d = %s, want %s", k, str(g), str(w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected target row %d = %s", k, str(g))
		}
	}
}

func ptr(s string) *string { return &s }

// runCLI runs the pgimageai binary against s's database and slot, in the
// test's environment, and returns its output; it fails unless the exit code
// is 0.
func runCLI(t *testing.T, s *source, args ...string) string {
	t.Helper()
	all := append([]string{args[0], "--dsn", s.db.DSN(), "--slot", s.slot}, args[1:]...)
	out, errOut, code := cli(t, nil, all...)
	if code != 0 {
		t.Fatalf("pgimageai %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out + errOut
}

// syncBuffer is a bytes.Buffer safe for the bridge's concurrent loggers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureLogs makes cfg log at debug level into the returned buffer (and to
// the test log).
func captureLogs(t *testing.T, cfg *bridge.Config) *syncBuffer {
	buf := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(buf, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	return buf
}

// TestHostileNames: schema, table, column, rule and model names full of
// quotes, spaces, semicolons and SQL work end to end — backfill, INSERT,
// UPDATE, primary-key change, DELETE, an errors row keyed by a quoted column
// name, TRUNCATE, status and errors output — and inject nothing.
func TestHostileNames(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	hostileSource(t, s)
	ai := newFakeAI(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ($1, 'openai', $2, 'gpt-test')`, hostileModel, ai.BaseURL())
	imgs := map[int][]byte{1: pngImage(t, 1), 2: pngImage(t, 2), 3: pngImage(t, 3)}
	for id, note := range map[int]string{1: "one", 2: "two", 3: "three'; --"} {
		insertHostile(t, s, id, imgs[id], note)
	}
	cfg := s.config(t)
	logs := captureLogs(t, &cfg)
	s.start(t, cfg)

	// A rule added while the bridge runs backfills the rows that exist.
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, $3, 'AI_IMAGE_COMPLETE', $4, $5, $6, $7)`,
		hostileRule, hostileSourceName, hostileImage, hostileModel, "Describe {{ "+hostileNote+" }}", hostileTargetName, hostileColumn)
	integration.WaitFor(t, 30*time.Second, "the backfill to finish", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = $1 AND state = 'done'", hostileRule) == 1
	})
	s.sync(t, 30*time.Second)
	caption := func(id int) *string { return ptr(captionOf(magic.DataURL(magic.PNG, imgs[id]))) }
	assertResults(t, hostileResults(t, s), map[int]*string{1: caption(1), 2: caption(2), 3: caption(3)})

	// The bridge created the target as the source's key plus a text column.
	var def string
	if err := s.conn.QueryRow(context.Background(), `SELECT string_agg(format('%s %s %s', attname, format_type(atttypid, atttypmod), attnotnull), ' | ' ORDER BY attnum)
FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, hostileTargetName).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := hostileKey + " integer t | " + hostileColumn + " text f"; def != want {
		t.Errorf("target columns %q, want %q", def, want)
	}

	// Streamed changes.
	table := pgx.Identifier{hostileSchema, hostileTable}.Sanitize()
	key, img := quoted(hostileKey), quoted(hostileImage)
	imgs[4], imgs[1] = pngImage(t, 4), pngImage(t, 11)
	insertHostile(t, s, 4, imgs[4], "four")
	s.exec(t, fmt.Sprintf("UPDATE %s SET %s = $1 WHERE %s = 1", table, img, key), imgs[1])
	s.exec(t, fmt.Sprintf("DELETE FROM %s WHERE %s = 2", table, key))
	s.exec(t, fmt.Sprintf("UPDATE %s SET %s = 30 WHERE %s = 3", table, key, key))
	imgs[30] = imgs[3]
	insertHostile(t, s, 5, []byte{}, "empty")
	s.sync(t, 30*time.Second)
	assertResults(t, hostileResults(t, s), map[int]*string{1: caption(1), 30: caption(30), 4: caption(4), 5: nil})

	// The prompt template read the hostile note column.
	prompts := map[string]bool{}
	for _, r := range ai.Requests() {
		prompts[r.Prompt] = true
	}
	for _, want := range []string{"Describe one", "Describe two", "Describe three'; --", "Describe four"} {
		if !prompts[want] {
			t.Errorf("no request with prompt %q; prompts: %v", want, prompts)
		}
	}

	// The empty image's errors row is keyed by the quoted column name.
	var srcTable, reason string
	err := s.conn.QueryRow(context.Background(), `SELECT source_table, reason FROM pgimageai.errors
WHERE rule = $1 AND source_key = jsonb_build_object($2::text, 5) AND resolved_at IS NULL`, hostileRule, hostileKey).Scan(&srcTable, &reason)
	if err != nil || srcTable != hostileSourceName || reason != "empty_image" {
		t.Errorf("errors row of key 5: %q, %q, %v; want %q, empty_image", srcTable, reason, err, hostileSourceName)
	}

	status := runCLI(t, s, "status")
	errs := runCLI(t, s, "errors", "--format", "json")
	t.Logf("status:\n%s\nerrors:\n%s", status, errs)
	if !strings.Contains(status, hostileRule) || !strings.Contains(status, hostileSourceName) || strings.Contains(status, "invalid") {
		t.Errorf("status does not show the rule %q on %s as valid:\n%s", hostileRule, hostileSourceName, status)
	}
	var list struct {
		Errors []struct {
			Rule      string         `json:"rule"`
			SourceKey map[string]any `json:"source_key"`
			Reason    string         `json:"reason"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(errs), &list); err != nil {
		t.Fatalf("errors --format json: %v", err)
	}
	if len(list.Errors) != 1 || list.Errors[0].Rule != hostileRule || list.Errors[0].SourceKey[hostileKey] != 5.0 || list.Errors[0].Reason != "empty_image" {
		t.Errorf("errors = %+v", list.Errors)
	}

	// retry finds the row behind the error by its quoted key column: the
	// image is still empty, so the row stays open with a second attempt (a
	// row not found would have its error resolved).
	runCLI(t, s, "retry", "--rule", hostileRule)
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 30*time.Second, "the retried error's second attempt", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = $1 AND attempts = 2 AND resolved_at IS NULL", hostileRule) == 1
	})

	// DELETE resolves the row's error; TRUNCATE empties the target.
	s.exec(t, fmt.Sprintf("DELETE FROM %s WHERE %s = 5", table, key))
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors after the DELETE", n)
	}
	s.exec(t, "TRUNCATE "+table)
	s.sync(t, 30*time.Second)
	assertResults(t, hostileResults(t, s), map[int]*string{})

	assertCanary(t, s)
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pg_class WHERE relnamespace = to_regnamespace($1) AND relkind = 'r'`, quoted(hostileSchema)); n != 2 {
		t.Errorf("%d tables in the hostile schema, want the source and the target", n)
	}
	if strings.Contains(logs.String(), "invalid rule skipped") {
		t.Errorf("the hostile rule was reported invalid:\n%s", logs)
	}
}
