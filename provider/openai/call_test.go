package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

func apiError(msg string) string {
	return `{"error":{"message":"` + msg + `","type":"invalid_request_error","param":null,"code":null}}`
}

func TestGenerateTextErrorsAndRetries(t *testing.T) {
	tests := []struct {
		name         string
		options      string
		answers      []answer
		wantRequests int
		wantWaits    []time.Duration // nil = not checked
		wantKind     provider.Kind   // 0 = success
		wantStatus   int
		wantAttempts int
		wantMsg      string
	}{
		// A 429 spends no retry (max_retries 0 still gets the answer); the
		// wait is the model's governor's, not the retrier's.
		{name: "429 with Retry-After then 200", options: `{"max_retries":0}`,
			answers:      []answer{{status: 429, header: map[string]string{"Retry-After": "1"}, body: apiError("Rate limit reached")}, ok200},
			wantRequests: 2, wantWaits: []time.Duration{}},
		{name: "429 with Retry-After-Ms then 200", options: `{"max_retries":0}`,
			answers:      []answer{{status: 429, header: map[string]string{"Retry-After-Ms": "300"}, body: apiError("slow down")}, ok200},
			wantRequests: 2, wantWaits: []time.Duration{}},
		// SPEC §3: a 503 with Retry-After is a rate limit too (no retry
		// spent); one without is an error of the row (below).
		{name: "503 with Retry-After then 200", options: `{"max_retries":0}`,
			answers:      []answer{{status: 503, header: map[string]string{"Retry-After": "0.2"}, body: apiError("busy")}, ok200},
			wantRequests: 2, wantWaits: []time.Duration{}},
		{name: "three 429s without hints then 200", options: `{"max_retries":1}`,
			answers: []answer{{status: 429, body: apiError("Rate limit reached")}, {status: 429, body: apiError("Rate limit reached")},
				{status: 429, body: apiError("Rate limit reached")}, ok200},
			wantRequests: 4, wantWaits: []time.Duration{}},
		// OpenAI's quota error (https://platform.openai.com/docs/guides/error-codes:
		// "429 - You exceeded your current quota, please check your plan and
		// billing details"; type and code insufficient_quota): waiting does
		// not cure it, so the row fails with the provider's message.
		{name: "429 insufficient_quota fails for good", options: `{}`,
			answers:      []answer{{status: 429, body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}},
			wantRequests: 1, wantKind: provider.Permanent, wantStatus: 429, wantAttempts: 1,
			wantMsg: "HTTP 429: You exceeded your current quota"},
		{name: "400 not retried", options: `{}`,
			answers:      []answer{{status: 400, body: apiError("Invalid image URL")}},
			wantRequests: 1, wantWaits: []time.Duration{}, wantKind: provider.Permanent, wantStatus: 400, wantAttempts: 1,
			wantMsg: "HTTP 400: Invalid image URL"},
		{name: "401 not retried", options: `{}`,
			answers:      []answer{{status: 401, body: apiError("Incorrect API key provided")}},
			wantRequests: 1, wantKind: provider.Permanent, wantStatus: 401, wantAttempts: 1},
		{name: "404 Ollama error string", options: `{}`,
			answers:      []answer{{status: 404, body: `{"error":"model \"llava\" not found, try pulling it first"}`}},
			wantRequests: 1, wantKind: provider.Permanent, wantStatus: 404, wantAttempts: 1,
			wantMsg: `HTTP 404: model "llava" not found, try pulling it first`},
		{name: "503 always exhausts max_retries", options: `{"max_retries":2}`,
			answers:      []answer{{status: 503, body: apiError("The server is overloaded")}},
			wantRequests: 3, wantKind: provider.Transient, wantStatus: 503, wantAttempts: 3,
			wantMsg: "HTTP 503: The server is overloaded (after 3 attempts)"},
		{name: "502 HTML body", options: `{"max_retries":0}`,
			answers:      []answer{{status: 502, body: "<html><body>Bad Gateway</body></html>"}},
			wantRequests: 1, wantKind: provider.Transient, wantStatus: 502, wantAttempts: 1,
			wantMsg: "HTTP 502: <html><body>Bad Gateway</body></html>"},
		{name: "500 empty body uses status text", options: `{"max_retries":0}`,
			answers:      []answer{{status: 500, body: ""}},
			wantRequests: 1, wantKind: provider.Transient, wantStatus: 500, wantMsg: "HTTP 500: Internal Server Error"},
		{name: "408 retried", options: `{}`,
			answers:      []answer{{status: 408, body: apiError("timeout")}, ok200},
			wantRequests: 2},
		{name: "409 retried", options: `{}`,
			answers:      []answer{{status: 409, body: apiError("conflict")}, ok200},
			wantRequests: 2},
		{name: "5xx then 5xx then 200", options: `{}`,
			answers:      []answer{{status: 500, body: apiError("oops")}, {status: 504, body: ""}, ok200},
			wantRequests: 3},
		{name: "no choices is a bad response, not retried", options: `{}`,
			answers:      []answer{{status: 200, body: `{"id":"x","choices":[],"usage":{}}`}},
			wantRequests: 1, wantKind: provider.BadResponse, wantAttempts: 1, wantMsg: "no choices"},
		{name: "empty content is a bad response", options: `{}`,
			answers:      []answer{{status: 200, body: `{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"length"}]}`}},
			wantRequests: 1, wantKind: provider.BadResponse, wantMsg: "no choices"},
		{name: "refusal is a bad response", options: `{}`,
			answers:      []answer{{status: 200, body: `{"choices":[{"message":{"role":"assistant","refusal":"I can't help"}}]}`}},
			wantRequests: 1, wantKind: provider.BadResponse, wantMsg: "refused: I can't help"},
		{name: "invalid JSON is a bad response", options: `{}`,
			answers:      []answer{{status: 200, body: `{"choices":[`}},
			wantRequests: 1, wantKind: provider.BadResponse, wantMsg: "invalid response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.answers...)
			p, rec := newTestProvider(t, testModel(srv.URL+"/v1", tt.options), nil)
			got, err := p.GenerateText(context.Background(), pngImage, "Describe")

			if n := len(srv.requests()); n != tt.wantRequests {
				t.Errorf("requests = %d, want %d", n, tt.wantRequests)
			}
			if tt.wantWaits != nil && fmt.Sprint(rec.waits) != fmt.Sprint(tt.wantWaits) {
				t.Errorf("waits = %v, want %v", rec.waits, tt.wantWaits)
			}
			if tt.wantKind == 0 {
				if err != nil || got.Text != "a red square" {
					t.Fatalf("GenerateText = %+v, %v; want success", got, err)
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
			if provider.Retryable(err) != (tt.wantKind == provider.Transient) {
				t.Errorf("Retryable = %v for kind %v", provider.Retryable(err), pe.Kind)
			}
		})
	}
}

// TestRetryAfterWaitIsReal makes one real retry: the second request comes no
// sooner than the Retry-After of the first answer.
func TestRetryAfterWaitIsReal(t *testing.T) {
	srv := newFakeServer(t, answer{status: 429, header: map[string]string{"Retry-After": "1"}, body: apiError("later")}, ok200)
	p, err := New(testModel(srv.URL, `{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := p.GenerateText(context.Background(), pngImage, "x"); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < time.Second {
		t.Fatalf("retried after %v, want >= the Retry-After of 1s", elapsed)
	}
}

func TestPerRequestTimeout(t *testing.T) {
	srv := newFakeServer(t, answer{status: 200, body: okBody, delay: 5 * time.Second})
	p, _ := newTestProvider(t, testModel(srv.URL, `{"timeout":"100ms","max_retries":1}`), nil)
	start := time.Now()
	_, err := p.GenerateText(context.Background(), pngImage, "x")
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("took %v, want about 2×100ms", elapsed)
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.Transient || pe.Status != 0 || pe.Attempts != 2 {
		t.Fatalf("err = %#v, want Transient, status 0, 2 attempts", err)
	}
	if !strings.Contains(err.Error(), "timeout of 100ms") {
		t.Errorf("err = %q, want it to name the timeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("a per-request timeout must not look like the caller's context ending")
	}
}

func TestCallerCancelReturnsPromptly(t *testing.T) {
	srv := newFakeServer(t, answer{status: 503, header: map[string]string{"Retry-After": "60"}, body: apiError("busy")})
	p, err := New(testModel(srv.URL, `{}`), nil) // real sleeps
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err = p.GenerateText(ctx, pngImage, "x")
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("took %v after cancel", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it to wrap context.Canceled", err)
	}

	// Canceled while the request is in flight.
	slow := newFakeServer(t, answer{status: 200, body: okBody, delay: 5 * time.Second})
	p2, _ := New(testModel(slow.URL, `{}`), nil)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	start = time.Now()
	_, err = p2.GenerateText(ctx2, pngImage, "x")
	if elapsed := time.Since(start); elapsed > 2*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("took %v, err = %v; want prompt return wrapping DeadlineExceeded", elapsed, err)
	}
}

func TestConnectionRefusedIsTransient(t *testing.T) {
	srv := newFakeServer(t)
	url := srv.URL
	srv.Close()
	p, rec := newTestProvider(t, testModel(url, `{"max_retries":1}`), nil)
	_, err := p.GenerateText(context.Background(), pngImage, "x")
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Kind != provider.Transient || pe.Status != 0 || pe.Attempts != 2 {
		t.Fatalf("err = %#v, want Transient, status 0, 2 attempts", err)
	}
	if len(rec.waits) != 1 {
		t.Errorf("waits = %v, want one backoff", rec.waits)
	}
}

// TestKeyNeverInErrors uses servers that echo the Authorization header in
// their error bodies; the key must appear in no error text, unwrapped chain
// included.
func TestKeyNeverInErrors(t *testing.T) {
	const key = "sk-secret-0123456789abcdef"
	tests := []struct {
		name string
		a    answer
	}{
		{"json error message", answer{status: 401, body: `{"error":{"message":"bad key: {{auth}}"}}`}},
		{"json error message echo", answer{status: 403, body: `{"error":{"message":"{{auth}}","type":"x"}}`}},
		{"ollama error string", answer{status: 400, body: `{"error":"{{auth}}"}`}},
		{"plain text body", answer{status: 500, body: "{{auth}}"}},
		{"bad response", answer{status: 200, body: "{{auth}}"}},
		{"empty answer", answer{status: 200, body: `{"choices":[{"message":{"refusal":"{{auth}}"}}]}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.a)
			m := testModel(srv.URL, `{"max_retries":0}`)
			m.APIKeyEnv = "KEY"
			p, _ := newTestProvider(t, m, map[string]string{"KEY": key})
			_, err := p.GenerateText(context.Background(), pngImage, "x")
			if err == nil {
				t.Fatal("want an error")
			}
			if r := srv.requests(); len(r) != 1 || r[0].auth != "Bearer "+key {
				t.Fatalf("the server did not see the key: %+v", r)
			}
			for e := err; e != nil; e = errors.Unwrap(e) {
				for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
					if strings.Contains(s, key) {
						t.Fatalf("key leaked in %T: %s", e, s)
					}
				}
			}
		})
	}
}

// TestKeyEncodingsNeverInErrors: servers that echo the key in each of its
// encodings (fakeapi.AllKeyForms) — in an error message, a plain error body, a
// refusal or a 2xx answer that is not JSON; the key appears in no error text,
// in no encoding.
func TestKeyEncodingsNeverInErrors(t *testing.T) {
	key := fakeapi.TestKey
	for name, form := range fakeapi.AllKeyForms(key) {
		quoted, _ := json.Marshal("bad key: Bearer " + form)
		for _, a := range []answer{
			{status: 401, body: `{"error":{"message":` + string(quoted) + `}}`},
			{status: 400, body: `{"error":{"message":"bad key: Bearer ` + form + `"}}`},
			{status: 500, body: "upstream said Bearer " + form},
			{status: 200, body: "not json: Bearer " + form},
			{status: 200, body: `{"choices":[{"message":{"refusal":` + string(quoted) + `}}]}`},
		} {
			t.Run(fmt.Sprintf("%s/%d", name, a.status), func(t *testing.T) {
				srv := newFakeServer(t, a)
				m := testModel(srv.URL, `{"max_retries":0}`)
				m.APIKeyEnv = "KEY"
				p, _ := newTestProvider(t, m, map[string]string{"KEY": key})
				_, err := p.GenerateText(context.Background(), pngImage, "x")
				if err == nil {
					t.Fatal("want an error")
				}
				if r := srv.requests(); len(r) != 1 || r[0].auth != "Bearer "+key {
					t.Fatalf("the server did not see the key: %+v", r)
				}
				fakeapi.AssertNoKey(t, err, key)
			})
		}
	}
}

func TestConcurrencyBounded(t *testing.T) {
	srv := newFakeServer(t, answer{status: 200, body: okBody, delay: 20 * time.Millisecond})
	p, _ := newTestProvider(t, testModel(srv.URL, `{"max_concurrency":2}`), nil)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := p.GenerateText(context.Background(), pngImage, "x"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	// Ten calls of 20 ms each, all started at once: two are in flight
	// together (the bound is reached, so it is not 1), never three.
	if len(srv.reqs) != 10 || srv.peak != 2 {
		t.Fatalf("requests = %d, peak in flight = %d; want 10 and exactly 2", len(srv.reqs), srv.peak)
	}
}

func TestRequestsPerMinutePacing(t *testing.T) {
	srv := newFakeServer(t)
	p, _ := newTestProvider(t, testModel(srv.URL, `{"requests_per_minute":600}`), nil) // one per 100ms
	start := time.Now()
	for range 4 {
		if _, err := p.GenerateText(context.Background(), pngImage, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Fatalf("4 requests at 600 rpm took %v, want >= 300ms", elapsed)
	}
}

func TestInvalidImage(t *testing.T) {
	srv := newFakeServer(t)
	p, _ := newTestProvider(t, testModel(srv.URL, `{}`), nil)
	for _, img := range []provider.Image{{Data: []byte("x"), MIME: "image/bmp"}, {MIME: "image/png"}} {
		_, err := p.GenerateText(context.Background(), img, "x")
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Kind != provider.Permanent {
			t.Errorf("GenerateText(%q) err = %v, want Permanent", img.MIME, err)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Fatalf("requests = %d, want 0", n)
	}
}

func TestServerSeesDataURLOfLargeImage(t *testing.T) {
	srv := newFakeServer(t)
	p, _ := newTestProvider(t, testModel(srv.URL, `{}`), nil)
	img := provider.Image{Data: append(append([]byte{}, pngImage.Data...), make([]byte, 1<<20)...), MIME: "image/png"}
	if _, err := p.GenerateText(context.Background(), img, ""); err != nil {
		t.Fatal(err)
	}
	body := srv.requests()[0].body.(map[string]any)
	parts := body["messages"].([]any)[0].(map[string]any)["content"].([]any)
	url := parts[1].(map[string]any)["image_url"].(map[string]any)["url"].(string)
	if !strings.HasPrefix(url, "data:image/png;base64,iVBORw0KGgo") || len(url) != len("data:image/png;base64,")+(len(img.Data)+2)/3*4 {
		t.Fatalf("data URL of %d bytes has length %d", len(img.Data), len(url))
	}
	if _, ok := parts[0].(map[string]any)["text"]; !ok {
		t.Fatal(`text part lacks "text"`)
	}
}
