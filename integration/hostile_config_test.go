package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/provider/vllm"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// openInvalidRule returns the detail of the ONE open invalid_rule row of
// rule, whose source_key must be {}.
func openInvalidRule(t *testing.T, s *source, rule string) (string, bool) {
	t.Helper()
	var n int
	var detail, key string
	err := s.conn.QueryRow(context.Background(), `SELECT count(*) OVER (), detail, source_key::text FROM pgimageai.errors
WHERE rule = $1 AND reason = 'invalid_rule' AND resolved_at IS NULL`, rule).Scan(&n, &detail, &key)
	if err != nil {
		t.Errorf("rule %s: no open invalid_rule row: %v", rule, err)
		return "", false
	}
	if n != 1 || key != "{}" {
		t.Errorf("rule %s: %d open invalid_rule rows, source_key %s; want 1, {}", rule, n, key)
		return detail, false
	}
	return detail, true
}

// TestHostileInvalidRules adds to TestInvalidRulesAreSkipped the invalid
// rules that hostile names make: a non-bytea column with a quoted name,
// missing tables whose names carry SQL, a view, an unparsable name, a target
// that exists with another key (which must not be altered) and a target in a
// missing schema. Each gets ONE open invalid_rule row with a clear detail
// and a log line; the valid rule beside them keeps running; deleting or
// fixing a rule resolves its row.
func TestHostileInvalidRules(t *testing.T) {
	s := newSource(t)
	hostileSource(t, s)
	s.exec(t, fmt.Sprintf("CREATE VIEW %s AS SELECT * FROM %s", pgx.Identifier{hostileSchema, "A View"}.Sanitize(), pgx.Identifier{hostileSchema, hostileTable}.Sanitize()))
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	add := func(name, sourceTable, column, target, targetColumn string) {
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, $2, $3, 'AI_IMAGE_COMPLETE', 'vision', 'p', $4, $5)`, name, sourceTable, column, target, targetColumn)
	}
	add("good", hostileSourceName, hostileImage, `public."Good Target"`, "Caption Text")
	bad := []struct{ name, source, column, target, want string }{
		{"not-bytea", hostileSourceName, hostileNote, "public.t1", `image column "Odd ""Schema""; DROP"."My 'Table'"."Note ""n""; --" is text, not bytea`},
		{"exact-case", hostileSourceName, "img; --", "public.t2", `has no column "img; --"`},
		{"missing-table", `"Odd ""Schema""; DROP"."Nope; DROP TABLE public.canary; --"`, hostileImage, "public.t3", "no such table"},
		{"unquoted-sql", `public.photos; DROP TABLE public.canary; --`, "img", "public.t4", "no such table"},
		{"unterminated-quote", `"Odd ""Schema"`, "img", "public.t5", "no such table"},
		{"view", `"Odd ""Schema""; DROP"."A View"`, hostileImage, "public.t6", "is not a table"},
		{"target-other-key", hostileSourceName, hostileImage, "public.canary", `lacks key column "Id \"x\""`},
		{"target-no-schema", hostileSourceName, hostileImage, `"No Schema"."T"`, `schema "No Schema" does not exist`},
		{"target-bad-name", hostileSourceName, hostileImage, `public."unterminated`, "target table name"},
	}
	for _, b := range bad {
		add(b.name, b.source, b.column, b.target, "c")
	}
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('template', $1, $2, 'AI_IMAGE_COMPLETE', 'vision', 'Describe {{note}}', 'public.t7', 'c')`, hostileSourceName, hostileImage)
	bad = append(bad, struct{ name, source, column, target, want string }{"template", hostileSourceName, hostileImage, "public.t7",
		`prompt names {{note}}, but "Odd ""Schema""; DROP"."My 'Table'" has no such column`})
	cfg := s.config(t)
	logs := captureLogs(t, &cfg)
	s.start(t, cfg)
	img := pngImage(t, 1)
	insertHostile(t, s, 1, img, "n")
	s.sync(t, 30*time.Second)

	var got string
	if err := s.conn.QueryRow(context.Background(), `SELECT "Caption Text" FROM public."Good Target" WHERE "Id ""x""" = 1`).Scan(&got); err != nil || got != captionOf(magic.DataURL(magic.PNG, img)) {
		t.Errorf("the valid rule's result: %q, %v", got, err)
	}
	for _, b := range bad {
		if detail, ok := openInvalidRule(t, s, b.name); ok && !strings.Contains(detail, b.want) {
			t.Errorf("rule %s: detail %q, want it to contain %q", b.name, detail, b.want)
		}
		if !strings.Contains(logs.String(), `msg="invalid rule skipped" rule=`+b.name+" ") {
			t.Errorf("rule %s: no log line", b.name)
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'invalid_rule'"); n != len(bad) {
		t.Errorf("%d invalid_rule rows, want %d", n, len(bad))
	}
	assertCanary(t, s)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('t1', 't3', 't4', 't5', 't6', 't7')"); n != 0 {
		t.Errorf("%d target tables were created for rules invalid before their target was looked at", n)
	}

	// Deleting one rule and fixing another resolve their rows, live; the
	// fixed rule backfills.
	s.exec(t, "DELETE FROM pgimageai.rules WHERE name = 'missing-table'")
	s.exec(t, "UPDATE pgimageai.rules SET image_column = $1 WHERE name = 'exact-case'", hostileImage)
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 30*time.Second, "the fixed rule's backfill", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.t2 WHERE c IS NOT NULL") == 1
	})
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule IN ('missing-table', 'exact-case') AND resolved_at IS NOT NULL`); n != 2 {
		t.Errorf("%d of the deleted and the fixed rule's rows resolved, want 2", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE reason = 'invalid_rule' AND resolved_at IS NULL"); n != len(bad)-2 {
		t.Errorf("%d open invalid_rule rows, want %d", n, len(bad)-2)
	}
	assertCanary(t, s)
}

// TestHostileBaseURLs: every base URL that is not a plain http(s) URL with a
// host is an invalid rule, for every registered provider — including local,
// which ignores base_url — while a valid rule keeps running.
func TestHostileBaseURLs(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "good", "vision", "public.captions", "caption")
	type badURL struct{ provider, url, want string }
	bad := []badURL{
		{"openai", "file:///etc/passwd", `scheme must be http or https, got "file"`},
		{"openai", "ftp://example.com/v1", `got "ftp"`},
		{"openai", "gopher://example.com:70/1", `got "gopher"`},
		{"openai", "javascript:alert(1)", `got "javascript"`},
		{"openai", "data:text/plain,hi", `got "data"`},
		{"openai", "ws://127.0.0.1:11434/v1", `got "ws"`},
		{"openai", "unix:///var/run/ollama.sock", `got "unix"`},
		{"openai", "api.openai.com/v1", "no scheme"},
		{"openai", "//api.openai.com/v1", "no scheme"},
		{"openai", "localhost:11434/v1", `got "localhost"`},
		{"openai", "127.0.0.1:11434/v1", "not a valid URL"},
		{"openai", "http://", "no host"},
		{"openai", "https:///v1", "no host"},
		{"openai", "http://:8080/v1", "no host"},
		{"openai", "http:/127.0.0.1/v1", "no host"},
		{"openai", "http://127.0.0.1:99999/v1", "port 99999"},
		{"openai", "http://127.0.0.1/v1?api-version=1", "query"},
		{"openai", "http://127.0.0.1/v1#", "fragment"},
		{"openai", " http://127.0.0.1/v1", "spaces"},
		{"openai", "http://127.0.0.1/v1\n", "control characters"},
		{"local", "file:///tmp/model", `got "file"`},
		{"local", "http://", "no host"},
		{"vllm", "file:///tmp/sock", `got "file"`},
		{"llamacpp", "gopher://h/", `got "gopher"`},
		{"voyage", "ftp://h/v1", `got "ftp"`},
		{"cohere", "javascript:alert(1)", `got "javascript"`},
		{"jina", "http://", "no host"},
	}
	for i, b := range bad {
		fn := "AI_IMAGE_COMPLETE"
		prompt := any("p")
		if b.provider != "openai" && b.provider != "local" {
			fn, prompt = "AI_IMAGE_EMBED", nil
		}
		s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ($1, $2, $3, 'x')`, fmt.Sprintf("m%d", i), b.provider, b.url)
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, 'public.photos', 'img', $2, $1, $3, $4, 'c')`, fmt.Sprintf("m%d", i), fn, prompt, fmt.Sprintf("public.t%d", i))
	}
	cfg := s.config(t)
	cfg.Registry.Register("local", local.Factory)
	cfg.Registry.Register("vllm", vllm.Factory)
	cfg.Registry.Register("llamacpp", llamacpp.Factory)
	cfg.Registry.Register("voyage", voyage.Factory)
	cfg.Registry.Register("cohere", cohere.Factory)
	cfg.Registry.Register("jina", jina.Factory)
	s.start(t, cfg)
	img := pngImage(t, 1)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", img)
	s.sync(t, 30*time.Second)
	assertCaption(t, s, 1, captionOf(magic.DataURL(magic.PNG, img)))
	for i, b := range bad {
		rule := fmt.Sprintf("m%d", i)
		if detail, ok := openInvalidRule(t, s, rule); ok && (!strings.Contains(detail, "base_url") || !strings.Contains(detail, b.want)) {
			t.Errorf("%s base_url %q: detail %q, want it to name base_url and contain %q", b.provider, b.url, detail, b.want)
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename ~ '^t[0-9]+$'"); n != 0 {
		t.Errorf("%d target tables were created for invalid rules", n)
	}
	if n := ai.Count(); n != 1 {
		t.Errorf("%d requests, want 1 (the valid rule's)", n)
	}
}

// echoAI is an OpenAI-compatible server that answers each prompt with a
// different way of giving the caller's Authorization header back.
type echoAI struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newEchoAI(t *testing.T) *echoAI {
	e := &echoAI{}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func (e *echoAI) serve(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	e.mu.Lock()
	e.auths = append(e.auths, auth)
	e.mu.Unlock()
	var req struct {
		Messages []struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
		} `json:"messages"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	var prompt string
	if n := len(req.Messages); n > 0 && len(req.Messages[n-1].Content) > 0 {
		prompt = req.Messages[n-1].Content[0].Text
	}
	answer := func(msg map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}}})
	}
	switch prompt {
	case "json-400":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"invalid header %s","type":"invalid_request_error"}}`, auth)
	case "text-401":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "Unauthorized.\nAuthorization: %s\n", auth)
	case "json-500":
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":"upstream rejected %s"}`, auth)
	case "garbage-200":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html>%s</html>", auth)
	case "wrong-json-200":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","choices":%q}`, auth)
	case "refusal-200":
		answer(map[string]any{"role": "assistant", "content": "", "refusal": "I will not, " + auth})
	case "escaped-500": // every character JSON-escaped, in a body that is not JSON
		w.WriteHeader(http.StatusInternalServerError)
		var esc strings.Builder
		for _, c := range auth {
			fmt.Fprintf(&esc, `\u%04X`, c)
		}
		fmt.Fprintf(w, "upstream rejected %s", esc.String())
	case "urlenc-401": // every byte URL-encoded, in a JSON message
		w.WriteHeader(http.StatusUnauthorized)
		var enc strings.Builder
		for _, c := range []byte(auth) {
			fmt.Fprintf(&enc, "%%%02x", c)
		}
		fmt.Fprintf(w, `{"error":{"message":"bad header %s"}}`, enc.String())
	case "structured-200":
		answer(map[string]any{"role": "assistant", "content": strings.Repeat("x", 180) + " " + auth})
	default:
		answer(map[string]any{"role": "assistant", "content": "fine"})
	}
}

// TestHostileKeyRedaction: an API key from api_key_env that the provider
// echoes back — in 4xx and 5xx error bodies, JSON or not, in 200 answers that
// are garbage, refusals, or structured output cut at 200 characters — appears
// nowhere: not in the bridge's log, errors rows, bookkeeping or target
// tables, nor in status and errors output. A base URL with credentials is
// refused as an invalid rule without showing them.
func TestHostileKeyRedaction(t *testing.T) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	key := "sk-" + hex.EncodeToString(secret)
	password, token := "pw-"+hex.EncodeToString(secret[:6]), "tok-"+hex.EncodeToString(secret[6:12])
	envName := "HOSTILE_KEY_" + strings.ToUpper(hex.EncodeToString(secret[12:])) // PG* variables may not hold keys
	t.Setenv(envName, key)

	s := newSource(t)
	ai := newEchoAI(t)
	host := strings.TrimPrefix(ai.URL, "http://")
	models := []struct{ name, url, options string }{
		{"keyed", ai.URL + "/v1", `{"max_retries": 0}`},
		{"structured", ai.URL + "/v1", `{"max_retries": 0, "response_format": {"type": "object"}}`},
		{"userinfo", "http://user:" + password + "@" + host + "/v1", `{}`},
		{"token", "http://" + token + "@" + host + "/v1", `{}`},
	}
	for _, m := range models {
		s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, api_key_env, options) VALUES ($1, 'openai', $2, 'gpt-test', $3, $4)`,
			m.name, m.url, envName, m.options)
	}
	// A model may not name the database's variables as its key's: whoever
	// writes models would receive them at a base URL of their choosing.
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, api_key_env) VALUES ('pgpass', 'openai', $1, 'gpt-test', 'PGPASSWORD')`, ai.URL+"/v1")
	rules := []struct{ prompt, model, reason, detail string }{
		{"ok", "keyed", "", ""},
		{"pgpass", "pgpass", "invalid_rule", "PGPASSWORD may not hold an API key"},
		{"json-400", "keyed", "provider_error", "invalid header Bearer [REDACTED]"},
		{"text-401", "keyed", "provider_error", "Authorization: Bearer [REDACTED]"},
		{"json-500", "keyed", "provider_error", "upstream rejected Bearer [REDACTED]"},
		{"escaped-500", "keyed", "provider_error", `u0072\u0020[REDACTED]`},
		{"urlenc-401", "keyed", "provider_error", "%72%20[REDACTED]"},
		{"garbage-200", "keyed", "bad_response", "invalid response"},
		{"wrong-json-200", "keyed", "bad_response", "invalid response"},
		{"refusal-200", "keyed", "bad_response", "I will not, Bearer [REDACTED]"},
		{"structured-200", "structured", "bad_response", "not valid JSON"},
		{"userinfo", "userinfo", "invalid_rule", "must not contain credentials"},
		{"token", "token", "invalid_rule", "must not contain credentials"},
	}
	for _, r := range rules {
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, 'public.photos', 'img', 'AI_IMAGE_COMPLETE', $2, $1, 'public.out', $3)`, r.prompt, r.model, strings.ReplaceAll(r.prompt, "-", "_"))
	}
	cfg := s.config(t)
	logs := captureLogs(t, &cfg)
	s.start(t, cfg)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (1, $1)", pngImage(t, 1))
	s.sync(t, 30*time.Second)

	// Each way of echoing the key ended where it should, scrubbed. A 5xx row
	// may first be parked — two rows failing at once, with no answer between,
	// look like an outage — and becomes its provider_error when it alone keeps
	// failing once it is sent again: wait for the errors rows.
	integration.WaitFor(t, 90*time.Second, "every errors row", func() bool {
		want := 0
		for _, r := range rules {
			if r.reason != "" {
				want++
			}
		}
		return queryInt(t, s.conn, "SELECT count(DISTINCT rule) FROM pgimageai.errors WHERE resolved_at IS NULL") >= want
	})
	for _, r := range rules {
		var reason, detail string
		err := s.conn.QueryRow(context.Background(), `SELECT reason, detail FROM pgimageai.errors WHERE rule = $1 AND resolved_at IS NULL`, r.prompt).Scan(&reason, &detail)
		switch {
		case r.reason == "" && err != pgx.ErrNoRows:
			t.Errorf("rule %s: errors row %s %q (%v), want none", r.prompt, reason, detail, err)
		case r.reason != "" && (err != nil || reason != r.reason || !strings.Contains(detail, r.detail)):
			t.Errorf("rule %s: %s %q (%v); want %s containing %q", r.prompt, reason, detail, err, r.reason, r.detail)
		}
	}
	var fine string
	if err := s.conn.QueryRow(context.Background(), "SELECT ok FROM public.out WHERE id = 1").Scan(&fine); err != nil || fine != "fine" {
		t.Errorf("the valid rule's result: %q, %v", fine, err)
	}
	ai.mu.Lock()
	auths := append([]string(nil), ai.auths...)
	ai.mu.Unlock()
	if len(auths) < 10 {
		t.Errorf("%d requests, want at least one per usable rule (10)", len(auths))
	}
	for _, a := range auths {
		if a != "Bearer "+key {
			t.Errorf("the server saw Authorization %q, want the key", a)
		}
	}

	// Nothing shows the secrets, whole or in part.
	var tables string
	if err := s.conn.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
  (SELECT string_agg(to_jsonb(e)::text, E'\n') FROM pgimageai.errors e),
  (SELECT string_agg(to_jsonb(b)::text, E'\n') FROM pgimageai.backfills b),
  (SELECT string_agg(to_jsonb(u)::text, E'\n') FROM pgimageai.usage u),
  (SELECT string_agg(to_jsonb(o)::text, E'\n') FROM public.out o))`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"the bridge's log": logs.String(),
		"tables":           tables,
		"status":           runCLI(t, s, "status"),
		"status json":      runCLI(t, s, "status", "--format", "json"),
		"errors":           runCLI(t, s, "errors", "--limit", "0"),
		"errors json":      runCLI(t, s, "errors", "--limit", "0", "--format", "json"),
	}
	if !strings.Contains(outputs["errors json"], "[REDACTED]") || !strings.Contains(outputs["status"], "must not contain credentials") {
		t.Errorf("the outputs lack the scrubbed errors:\n%s\n%s", outputs["errors json"], outputs["status"])
	}
	secrets := []string{key, key[3:11], key[len(key)-8:], password, token}
	for what, out := range outputs {
		for _, sec := range secrets {
			if strings.Contains(out, sec) {
				t.Errorf("%s shows %q:\n%s", what, sec, out)
			}
		}
		if provider.NewRedactor(key).Contains(out) { // escaped, encoded, escaped twice …
			t.Errorf("%s shows the key encoded:\n%s", what, out)
		}
	}
}
