package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/console"
	"github.com/pgimageai/pgimageai/provider/local"
)

// docBlock returns the SQL between <!-- name:begin --> and <!-- name:end -->
// in docs/console.md, without the code fence: the documented role is the
// one tested.
func docBlock(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/console.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/console.md has no %s block", name)
	}
	block := strings.TrimSpace(s[i+len(begin) : j])
	return strings.TrimSuffix(strings.TrimPrefix(block, "```sql"), "```")
}

// TestConsoleRole runs the console as the documented role (its two grant
// blocks as written): every page reads, a thumbnail of a table the role may
// not read is not shown, a target it may not read is said so, and a retry
// request is written under the role's name.
func TestConsoleRole(t *testing.T) {
	s := newSource(t)
	s.exec(t, `CREATE TABLE public.secret (id int PRIMARY KEY, img bytea)`)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('pixels', 'local', 'any')`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column) VALUES
  ('describe', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'pixels', 'Describe', 'public.captions', 'caption'),
  ('hidden', 'public.secret', 'img', 'AI_IMAGE_COMPLETE', 'pixels', 'Describe', 'public.secret_captions', 'caption')`)
	cfg := s.config(t)
	cfg.Registry.Register("local", local.Factory)
	s.start(t, cfg)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1), (2, 'not an image'::bytea)", photoJPEG(t, 1))
	s.exec(t, "INSERT INTO public.secret (id, img) VALUES (1, $1)", photoJPEG(t, 2))
	s.sync(t, 60*time.Second)

	role := "console_" + s.slot
	password := "pw-" + role
	sql := docBlock(t, "console-role") + "\n" + docBlock(t, "console-retry")
	sql = strings.ReplaceAll(sql, "pgimageai_console", role)
	sql = strings.ReplaceAll(sql, "'change-me'", "'"+password+"'")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg := s.db.Postgres()
		_ = pg.Exec(ctx, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_ = pg.Exec(ctx, s.db.Name, fmt.Sprintf("REASSIGN OWNED BY %[1]s TO postgres; DROP OWNED BY %[1]s", pgx.Identifier{role}.Sanitize()))
		if err := pg.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	s.exec(t, sql)

	u, err := url.Parse(s.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	ctx := context.Background()
	db, err := console.OpenDB(ctx, console.DBConfig{SourceDSN: u.String(), Group: bridge.DefaultGroup, Slot: s.slot, AllowRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logs strings.Builder
	srv, err := console.New(console.Config{Token: consoleToken, AllowRetry: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, db)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	thumb := func(rule string) string {
		return "/thumb?" + url.Values{"rule": {rule}, "key": {`{"id": 1}`}}.Encode()
	}
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/", 200, "describe"},
		{"/rules/describe", 200, "JPEG image, 640x480 pixels"},
		{"/rules/hidden", 200, "may not read public.secret_captions"},
		{"/errors", 200, "unknown_format"},
		{thumb("describe"), 200, ""},
		{thumb("hidden"), 404, ""},
	} {
		t.Run(c.path, func(t *testing.T) {
			status, body := benchGet(t, ts.URL+c.path)
			if status != c.status || !strings.Contains(body, c.want) {
				t.Fatalf("GET %s as the console role: %d, want %d with %q:\n%.2000s", c.path, status, c.status, c.want, body)
			}
		})
	}

	// The retry, confirmed, is written under the role's name.
	_, page := benchGet(t, ts.URL+"/errors")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF field on the errors page")
	}
	form := url.Values{"csrf": {m[1]}, "rule": {"describe"}, "reason": {"unknown_format"}, "confirm": {"yes"}}
	req, _ := http.NewRequest("POST", ts.URL+"/retry", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("retry as the console role: %d", resp.StatusCode)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.retry_requests WHERE rule = 'describe' AND reason = 'unknown_format' AND requested_by = $1", role); n != 1 {
		t.Errorf("%d retry requests by the console role, want 1", n)
	}
	if strings.Contains(logs.String(), consoleToken) || strings.Contains(logs.String(), password) {
		t.Error("the console logged its token or its password")
	}
}
