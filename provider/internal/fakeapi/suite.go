package fakeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// Spec describes one embedding provider to Suite.
type Spec struct {
	Provider string           // registry name
	Factory  provider.Factory // must not yield a provider.TextGenerator
	// New builds the provider of m with its Retrier's Sleep replaced.
	New    func(m provider.Model, env provider.Env, sleep func(context.Context, time.Duration) error) (provider.Embedder, error)
	Suffix string // appended to the server's URL to form base_url, e.g. "/v1"
	Path   string // the request path expected, e.g. "/v1/embeddings"

	Inputs    func(body map[string]any) []string        // a request's image payloads
	Echo      func(vecs [][]float32, tokens int) string // a 200 answer
	Payload   func(img provider.Image) string           // what an image is sent as
	ErrorBody func(msg string) string                   // an error answer carrying msg

	MaxBatchSize int // 0 = the provider does not batch
}

// Model returns a model row of the spec's provider pointing at srv.
func (sp Spec) Model(srv *Server, options string) provider.Model {
	return provider.Model{Name: "emb", Provider: sp.Provider, BaseURL: srv.URL + sp.Suffix, Model: "test-model",
		Options: json.RawMessage(options)}
}

// NewServer starts a server speaking the spec's answers.
func (sp Spec) NewServer(t testing.TB, script ...Answer) *Server {
	return NewServer(t, sp.Inputs, sp.Echo, script...)
}

func (sp Spec) build(t testing.TB, m provider.Model, env map[string]string) (provider.Embedder, *WaitRecorder) {
	t.Helper()
	rec := &WaitRecorder{}
	p, err := sp.New(m, Env(env), rec.Sleep)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, rec
}

// Suite runs the behaviour shared by all embedding providers.
func Suite(t *testing.T, sp Spec) {
	t.Run("not a text generator", func(t *testing.T) {
		p, err := sp.Factory(provider.Model{Name: "m", Provider: sp.Provider, BaseURL: "http://localhost:1/v1", Model: "x"}, Env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.(provider.TextGenerator); ok {
			t.Fatalf("%T implements provider.TextGenerator", p)
		}
		if _, ok := p.(provider.Embedder); !ok {
			t.Fatalf("%T does not implement provider.Embedder", p)
		}
	})
	t.Run("config errors", func(t *testing.T) { configErrors(t, sp) })
	t.Run("echo", func(t *testing.T) {
		srv := sp.NewServer(t)
		p, _ := sp.build(t, sp.Model(srv, `{"dimensions":3}`), nil)
		img := Image(7)
		got, err := p.EmbedImage(context.Background(), img)
		if err != nil {
			t.Fatal(err)
		}
		if want := Vector(sp.Payload(img)); !slices.Equal(got.Vector, want) || got.Usage.PromptTokens != 10 {
			t.Fatalf("EmbedImage = %+v, want vector %v and 10 prompt tokens", got, want)
		}
		r := srv.Requests()
		if len(r) != 1 || r[0].Method != "POST" || r[0].Path != sp.Path || r[0].Header.Get("Content-Type") != "application/json" {
			t.Fatalf("requests = %d; first %s %s (%s), want one POST %s application/json", len(r), r[0].Method, r[0].Path, r[0].Header.Get("Content-Type"), sp.Path)
		}
		if _, ok := r[0].Header["Authorization"]; ok {
			t.Fatal("Authorization sent without api_key_env")
		}
	})
	t.Run("errors and retries", func(t *testing.T) { errorsAndRetries(t, sp) })
	t.Run("key never in errors", func(t *testing.T) { keyNeverInErrors(t, sp) })
	t.Run("key in no encoding in errors", func(t *testing.T) { keyEncodingsNeverInErrors(t, sp) })
	t.Run("answers bounded", func(t *testing.T) { answersBounded(t, sp) })
	if sp.MaxBatchSize > 0 {
		t.Run("batching", func(t *testing.T) { batching(t, sp) })
	}
}

func configErrors(t *testing.T, sp Spec) {
	tests := []struct {
		name    string
		m       provider.Model
		env     map[string]string
		wantErr string
	}{
		{name: "unknown option", m: provider.Model{BaseURL: "http://h/v1", Model: "x", Options: json.RawMessage(`{"dimension":3}`)}, wantErr: `"dimension"`},
		{name: "negative dimensions", m: provider.Model{BaseURL: "http://h/v1", Model: "x", Options: json.RawMessage(`{"dimensions":-1}`)}, wantErr: "option dimensions"},
		{name: "bad scheme", m: provider.Model{BaseURL: "ftp://h/v1", Model: "x"}, wantErr: "scheme must be http or https"},
		{name: "password not shown", m: provider.Model{BaseURL: "ftp://u:hunter2@h/v1", Model: "x"}, wantErr: "scheme must be http or https"},
		{name: "credentials refused", m: provider.Model{BaseURL: "http://u:hunter2@h/v1", Model: "x"}, wantErr: "must not contain credentials"},
		{name: "file scheme", m: provider.Model{BaseURL: "file:///etc/passwd", Model: "x"}, wantErr: "scheme must be http or https"},
		{name: "empty model", m: provider.Model{BaseURL: "http://h/v1", Model: " "}, wantErr: "model id is empty"},
		{name: "key variable unset", m: provider.Model{BaseURL: "http://h/v1", Model: "x", APIKeyEnv: "NOPE"}, wantErr: "NOPE is not set"},
		{name: "key variable empty", m: provider.Model{BaseURL: "http://h/v1", Model: "x", APIKeyEnv: "K"}, env: map[string]string{"K": ""}, wantErr: "K is empty"},
		{name: "max_retries negative", m: provider.Model{BaseURL: "http://h/v1", Model: "x", Options: json.RawMessage(`{"max_retries":-1}`)}, wantErr: "option max_retries"},
	}
	if sp.MaxBatchSize > 0 {
		tests = append(tests,
			struct {
				name    string
				m       provider.Model
				env     map[string]string
				wantErr string
			}{name: "batch_size too large", m: provider.Model{BaseURL: "http://h/v1", Model: "x",
				Options: json.RawMessage(fmt.Sprintf(`{"batch_size":%d}`, sp.MaxBatchSize+1))}, wantErr: "option batch_size"},
			struct {
				name    string
				m       provider.Model
				env     map[string]string
				wantErr string
			}{name: "batch_wait too long", m: provider.Model{BaseURL: "http://h/v1", Model: "x",
				Options: json.RawMessage(`{"batch_wait":"1m"}`)}, wantErr: "option batch_wait"})
	} else {
		tests = append(tests, struct {
			name    string
			m       provider.Model
			env     map[string]string
			wantErr string
		}{name: "batch_size not an option", m: provider.Model{BaseURL: "http://h/v1", Model: "x",
			Options: json.RawMessage(`{"batch_size":4}`)}, wantErr: `"batch_size"`})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.m.Provider = sp.Provider
			_, err := sp.Factory(tt.m, Env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("password in %q", err)
			}
		})
	}
}

func errorsAndRetries(t *testing.T, sp Spec) {
	echo := Answer{}
	tests := []struct {
		name         string
		options      string
		script       []Answer
		wantRequests int
		wantWaits    []time.Duration // nil = not checked
		wantKind     provider.Kind   // 0 = success
		wantStatus   int
		wantAttempts int
		wantMsg      string
	}{
		// A 429 spends no retry (max_retries 0 still gets the answer); the
		// wait is the model's governor's (provider/pace), not the retrier's.
		{name: "429 with Retry-After then 200", options: `{"max_retries":0}`,
			script:       []Answer{{Status: 429, Header: map[string]string{"Retry-After": "0.2"}, Body: sp.ErrorBody("rate limited")}, echo},
			wantRequests: 2, wantWaits: []time.Duration{}},
		{name: "400 not retried", options: `{}`,
			script:       []Answer{{Status: 400, Body: sp.ErrorBody("image could not be decoded")}},
			wantRequests: 1, wantWaits: []time.Duration{}, wantKind: provider.Permanent, wantStatus: 400, wantAttempts: 1,
			wantMsg: "HTTP 400: image could not be decoded"},
		{name: "401 not retried", options: `{}`,
			script:       []Answer{{Status: 401, Body: sp.ErrorBody("invalid api key")}},
			wantRequests: 1, wantKind: provider.Permanent, wantStatus: 401, wantAttempts: 1, wantMsg: "invalid api key"},
		{name: "503 exhausts max_retries", options: `{"max_retries":2}`,
			script:       []Answer{{Status: 503, Body: sp.ErrorBody("overloaded")}},
			wantRequests: 3, wantKind: provider.Transient, wantStatus: 503, wantAttempts: 3,
			wantMsg: "HTTP 503: overloaded (after 3 attempts)"},
		{name: "500 for an undecodable image not retried", options: `{}`,
			script:       []Answer{{Status: 500, Body: sp.ErrorBody("Failed to load image or audio file")}},
			wantRequests: 1, wantKind: provider.Permanent, wantStatus: 500, wantAttempts: 1,
			wantMsg: "HTTP 500: Failed to load image or audio file"},
		{name: "500 empty body uses status text", options: `{"max_retries":0}`,
			script:       []Answer{{Status: 500}},
			wantRequests: 1, wantKind: provider.Transient, wantStatus: 500, wantMsg: "HTTP 500: Internal Server Error"},
		{name: "502 HTML then 200", options: `{}`,
			script:       []Answer{{Status: 502, Body: "<html>Bad Gateway</html>"}, echo},
			wantRequests: 2},
		{name: "invalid JSON is a bad response", options: `{}`,
			script:       []Answer{{Status: 200, Body: `{"data":[`}},
			wantRequests: 1, wantKind: provider.BadResponse, wantAttempts: 1, wantMsg: "invalid response"},
		{name: "no vectors is a bad response", options: `{}`,
			script:       []Answer{{Status: 200, Body: `{}`}},
			wantRequests: 1, wantKind: provider.BadResponse},
		{name: "too few vectors is a bad response", options: `{}`,
			script:       []Answer{{Status: 200, Body: sp.Echo(nil, 0)}},
			wantRequests: 1, wantKind: provider.BadResponse},
		{name: "dimension mismatch is a bad response", options: `{"dimensions":4}`,
			script:       []Answer{echo},
			wantRequests: 1, wantKind: provider.BadResponse, wantMsg: "returned 3 dimensions, want 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := sp.NewServer(t, tt.script...)
			p, rec := sp.build(t, sp.Model(srv, tt.options), nil)
			got, err := p.EmbedImage(context.Background(), Image(1))
			if n := len(srv.Requests()); n != tt.wantRequests {
				t.Errorf("requests = %d, want %d", n, tt.wantRequests)
			}
			if tt.wantWaits != nil && fmt.Sprint(rec.Waits) != fmt.Sprint(tt.wantWaits) {
				t.Errorf("waits = %v, want %v", rec.Waits, tt.wantWaits)
			}
			if tt.wantKind == 0 {
				if err != nil || len(got.Vector) != 3 {
					t.Fatalf("EmbedImage = %+v, %v; want success", got, err)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *provider.Error", err, err)
			}
			if pe.Kind != tt.wantKind || pe.Status != tt.wantStatus {
				t.Errorf("kind %v status %d, want %v %d (%v)", pe.Kind, pe.Status, tt.wantKind, tt.wantStatus, err)
			}
			if tt.wantAttempts != 0 && pe.Attempts != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", pe.Attempts, tt.wantAttempts)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}

	t.Run("timeout is transient", func(t *testing.T) {
		srv := sp.NewServer(t, Answer{Status: 200, Body: sp.Echo([][]float32{{1, 2, 3}}, 1), Delay: 5 * time.Second})
		p, _ := sp.build(t, sp.Model(srv, `{"timeout":"100ms","max_retries":1}`), nil)
		start := time.Now()
		_, err := p.EmbedImage(context.Background(), Image(1))
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Kind != provider.Transient || pe.Attempts != 2 || !strings.Contains(err.Error(), "timeout of 100ms") {
			t.Fatalf("err = %v, want Transient after 2 attempts naming the timeout", err)
		}
		if errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
			t.Fatalf("err = %v after %v", err, time.Since(start))
		}
	})
	t.Run("invalid image not sent", func(t *testing.T) {
		srv := sp.NewServer(t)
		p, _ := sp.build(t, sp.Model(srv, `{}`), nil)
		for _, img := range []provider.Image{{Data: []byte("x"), MIME: "image/bmp"}, {MIME: "image/png"}} {
			var pe *provider.Error
			if _, err := p.EmbedImage(context.Background(), img); !errors.As(err, &pe) || pe.Kind != provider.Permanent {
				t.Errorf("EmbedImage(%q) err = %v, want Permanent", img.MIME, err)
			}
		}
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("requests = %d, want 0", n)
		}
	})
}

func keyNeverInErrors(t *testing.T, sp Spec) {
	const key = "sk-secret-0123456789abcdef"
	for _, a := range []Answer{
		{Status: 401, Body: sp.ErrorBody("bad key: {{auth}}")},
		{Status: 500, Body: "{{auth}}"},
		{Status: 200, Body: "{{auth}}"},
		{Status: 200, Body: `{"data":"{{auth}}","embeddings":"{{auth}}"}`},
		// Invalid JSON quoted up to 200 characters: the cut falls inside the key.
		{Status: 200, Body: strings.Repeat("x", 180) + " {{auth}}"},
	} {
		srv := sp.NewServer(t, a)
		m := sp.Model(srv, `{"max_retries":0}`)
		m.APIKeyEnv = "KEY"
		p, _ := sp.build(t, m, map[string]string{"KEY": key})
		_, err := p.EmbedImage(context.Background(), Image(1))
		if err == nil {
			t.Fatalf("%d %s: want an error", a.Status, a.Body)
		}
		if r := srv.Requests(); len(r) != 1 || r[0].Header.Get("Authorization") != "Bearer "+key {
			t.Fatalf("the server did not see the key")
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
				if strings.Contains(s, key[:9]) {
					t.Fatalf("key leaked in %T: %s", e, s)
				}
			}
		}
	}
}

// keyEncodingsNeverInErrors: servers that echo the key in each of its
// encodings (AllKeyForms) in an error message, a plain error body or a 2xx
// answer that is not JSON; the key appears in no error text, in no encoding.
func keyEncodingsNeverInErrors(t *testing.T, sp Spec) {
	for name, form := range AllKeyForms(TestKey) {
		for _, a := range []Answer{
			{Status: 401, Body: sp.ErrorBody("bad key: Bearer " + form)},
			{Status: 400, Body: `{"error":{"message":"bad key: Bearer ` + form + `"},"message":"` + form + `","detail":"` + form + `"}`},
			{Status: 500, Body: "upstream said Bearer " + form},
			{Status: 200, Body: "not json: Bearer " + form},
		} {
			t.Run(fmt.Sprintf("%s/%d", name, a.Status), func(t *testing.T) {
				srv := sp.NewServer(t, a)
				m := sp.Model(srv, `{"max_retries":0}`)
				m.APIKeyEnv = "KEY"
				p, _ := sp.build(t, m, map[string]string{"KEY": TestKey})
				_, err := p.EmbedImage(context.Background(), Image(1))
				if err == nil {
					t.Fatalf("%d %s: want an error", a.Status, a.Body)
				}
				if r := srv.Requests(); len(r) != 1 || r[0].Header.Get("Authorization") != "Bearer "+TestKey {
					t.Fatalf("the server did not see the key")
				}
				AssertNoKey(t, err, TestKey)
			})
		}
	}
}

// answersBounded: a 600 MB answer, a 2xx of vectors or an error answer, is
// read no further than its bound. A 2xx is a bad_response, not retried; an
// error answer is classified by its status from the start of its body.
func answersBounded(t *testing.T, sp Spec) {
	const vectorStart = `{"data":[{"index":0,"embedding":[`
	tests := []struct {
		name         string
		status       int
		prefix, fill string
		wantKind     provider.Kind
		wantMsg      string
		wantRequests int64
	}{
		{"2xx of one endless vector", 200, vectorStart, "0.1,", provider.BadResponse, "answer larger than", 1},
		{"2xx of endless white space", 200, "", " ", provider.BadResponse, "answer larger than", 1},
		{"5xx of endless text", 500, "", "overloaded ", provider.Transient, "overloaded", 2},
		{"4xx of endless text", 400, "", "bad ", provider.Permanent, "bad bad", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := NewStreamServer(t, tt.status, tt.prefix, tt.fill, HugeAnswer)
			m := provider.Model{Name: "emb", Provider: sp.Provider, BaseURL: srv.URL + sp.Suffix, Model: "test-model",
				Options: json.RawMessage(`{"max_retries":1}`)}
			p, _ := sp.build(t, m, nil)
			_, err := p.EmbedImage(context.Background(), Image(1))
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != tt.wantKind || !strings.Contains(pe.Message, tt.wantMsg) {
				t.Fatalf("EmbedImage err = %v, want %s containing %q", err, tt.wantKind, tt.wantMsg)
			}
			if n := srv.Requests.Load(); n != tt.wantRequests {
				t.Errorf("requests = %d, want %d", n, tt.wantRequests)
			}
			// What the server could write before the client hung up: the
			// bound, plus what the loopback's socket buffers hold.
			written := srv.Written.Load()
			t.Logf("%s: the server wrote %d of %d bytes in %d requests (%s)", sp.Provider, written, HugeAnswer, srv.Requests.Load(), pe.Message)
			if limit := int64(64 << 20); written > limit {
				t.Errorf("the server wrote %d bytes, want the read to stop below %d", written, limit)
			}
		})
	}
}

func batching(t *testing.T, sp Spec) {
	embedAll := func(t *testing.T, p provider.Embedder, n int) []provider.Embedding {
		t.Helper()
		out := make([]provider.Embedding, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				e, err := p.EmbedImage(context.Background(), Image(i))
				if err != nil {
					t.Errorf("row %d: %v", i, err)
				}
				out[i] = e
			})
		}
		wg.Wait()
		return out
	}
	t.Run("one request for rows within the window", func(t *testing.T) {
		srv := sp.NewServer(t)
		p, _ := sp.build(t, sp.Model(srv, `{"batch_size":8,"batch_wait":"2s"}`), nil)
		got := embedAll(t, p, 8)
		r := srv.Requests()
		if len(r) != 1 || len(sp.Inputs(r[0].Body)) != 8 {
			t.Fatalf("requests = %d, want 1 with 8 inputs", len(r))
		}
		tokens := 0
		for i, e := range got {
			if want := Vector(sp.Payload(Image(i))); !slices.Equal(e.Vector, want) {
				t.Errorf("row %d got %v, want its own vector %v", i, e.Vector, want)
			}
			tokens += e.Usage.PromptTokens
		}
		if tokens != 80 {
			t.Errorf("prompt tokens of the rows sum to %d, want the request's 80", tokens)
		}
	})
	t.Run("batch_size splits", func(t *testing.T) {
		srv := sp.NewServer(t)
		p, _ := sp.build(t, sp.Model(srv, `{"batch_size":4,"batch_wait":"300ms"}`), nil)
		got := embedAll(t, p, 10)
		var sizes []int
		for _, r := range srv.Requests() {
			sizes = append(sizes, len(sp.Inputs(r.Body)))
		}
		slices.Sort(sizes)
		if !slices.Equal(sizes, []int{2, 4, 4}) {
			t.Fatalf("batch sizes = %v, want [2 4 4]", sizes)
		}
		for i, e := range got {
			if !slices.Equal(e.Vector, Vector(sp.Payload(Image(i)))) {
				t.Errorf("row %d got another row's vector", i)
			}
		}
	})
	// A batch answered 429 is sent again whole, at the model's pace, without
	// spending a retry (max_retries 0): never split into rows.
	t.Run("a batch answered 429 is sent again whole", func(t *testing.T) {
		srv := sp.NewServer(t, Answer{Status: 429, Header: map[string]string{"Retry-After": "0.1"}, Body: sp.ErrorBody("rate limited")}, Answer{})
		p, _ := sp.build(t, sp.Model(srv, `{"batch_size":4,"batch_wait":"2s","max_retries":0}`), nil)
		got := embedAll(t, p, 4)
		r := srv.Requests()
		if len(r) != 2 || len(sp.Inputs(r[0].Body)) != 4 || len(sp.Inputs(r[1].Body)) != 4 {
			t.Fatalf("requests = %d, want 2 (the 429, then the same batch) of 4 inputs each", len(r))
		}
		for i, e := range got {
			if !slices.Equal(e.Vector, Vector(sp.Payload(Image(i)))) {
				t.Errorf("row %d got %v", i, e.Vector)
			}
		}
	})
	t.Run("batch_size 1 sends each row alone", func(t *testing.T) {
		srv := sp.NewServer(t)
		p, _ := sp.build(t, sp.Model(srv, `{"batch_size":1}`), nil)
		embedAll(t, p, 3)
		for _, r := range srv.Requests() {
			if n := len(sp.Inputs(r.Body)); n != 1 {
				t.Fatalf("a request has %d inputs, want 1", n)
			}
		}
		if n := len(srv.Requests()); n != 3 {
			t.Fatalf("requests = %d, want 3", n)
		}
	})
	t.Run("one caller's cancel does not fail the others", func(t *testing.T) {
		srv := sp.NewServer(t)
		srv.Delay = 300 * time.Millisecond
		p, _ := sp.build(t, sp.Model(srv, `{"batch_size":3,"batch_wait":"1s"}`), nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var failed atomic.Int32
		for i := range 3 {
			wg.Go(func() {
				c := context.Background()
				if i == 0 {
					c = ctx
				}
				e, err := p.EmbedImage(c, Image(i))
				switch {
				case i == 0 && !errors.Is(err, context.Canceled):
					t.Errorf("cancelled row: err = %v, want context.Canceled", err)
				case i != 0 && (err != nil || !slices.Equal(e.Vector, Vector(sp.Payload(Image(i))))):
					failed.Add(1)
					t.Errorf("row %d: %v, %v", i, e.Vector, err)
				}
			})
		}
		time.Sleep(100 * time.Millisecond) // the batch is in flight
		cancel()
		wg.Wait()
		if n := len(srv.Requests()); n != 1 {
			t.Fatalf("requests = %d, want 1", n)
		}
	})
	t.Run("one refused image costs only its own row", func(t *testing.T) {
		for _, refusal := range []Answer{
			{Status: 400, Body: sp.ErrorBody("image could not be decoded")},
			// llama-server's answer to an image its decoder cannot read.
			{Status: 500, Body: sp.ErrorBody("Failed to load image or audio file")},
		} {
			srv := sp.NewServer(t)
			bad := sp.Payload(Image(5))
			srv.Refuse = func(in string) bool { return in == bad }
			srv.Refusal = refusal
			p, _ := sp.build(t, sp.Model(srv, `{"batch_size":8,"batch_wait":"1s"}`), nil)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					e, err := p.EmbedImage(context.Background(), Image(i))
					var pe *provider.Error
					switch {
					case i == 5 && (!errors.As(err, &pe) || pe.Status != refusal.Status || pe.Kind != provider.Permanent || pe.Attempts != 1):
						t.Errorf("refused row: err = %v, want the %d, not retried", err, refusal.Status)
					case i != 5 && (err != nil || !slices.Equal(e.Vector, Vector(sp.Payload(Image(i))))):
						t.Errorf("row %d: %v, %v; want its vector", i, e.Vector, err)
					}
				})
			}
			wg.Wait()
			// 8 inputs: the batch, then two halves per level down to the bad one.
			if n := len(srv.Requests()); n != 7 {
				t.Fatalf("%d: requests = %d, want 7", refusal.Status, n)
			}
		}
	})
	t.Run("a request's error reaches every row", func(t *testing.T) {
		srv := sp.NewServer(t, Answer{Status: 401, Body: sp.ErrorBody("invalid api key")})
		p, _ := sp.build(t, sp.Model(srv, `{"batch_size":3,"batch_wait":"1s"}`), nil)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				var pe *provider.Error
				if _, err := p.EmbedImage(context.Background(), Image(i)); !errors.As(err, &pe) || pe.Status != 401 {
					t.Errorf("row %d: err = %v, want the 401", i, err)
				}
			})
		}
		wg.Wait()
		if n := len(srv.Requests()); n != 1 {
			t.Fatalf("requests = %d, want 1", n)
		}
	})
}

// BenchmarkRequestsPerRow embeds rows images from as many goroutines per
// iteration and reports the requests made per row, with batch_size size
// (1 = no batching).
func BenchmarkRequestsPerRow(b *testing.B, sp Spec, rows, size int) {
	srv := sp.NewServer(b)
	p, _ := sp.build(b, sp.Model(srv, fmt.Sprintf(`{"batch_size":%d,"batch_wait":"20ms","max_concurrency":64}`, size)), nil)
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range rows {
			wg.Go(func() {
				if _, err := p.EmbedImage(context.Background(), Image(i)); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(len(srv.Requests()))/float64(rows*b.N), "requests/row")
}
