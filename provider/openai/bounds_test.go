package openai

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

// TestAnswersBounded: go-openai reads bodies without a limit; the doer
// bounds them. A 600 MB answer is read no further than its bound: a 2xx is a
// bad_response and not retried, an error answer is classified by its status
// from the start of its body (a 5xx retried, each attempt reading only that).
func TestAnswersBounded(t *testing.T) {
	const content = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`
	tests := []struct {
		name         string
		status       int
		prefix, fill string
		wantKind     provider.Kind
		wantMsg      string
		wantRequests int64
	}{
		{"2xx of an endless content", 200, content, "a", provider.BadResponse, "answer larger than 2097152 bytes", 1},
		{"2xx of escaped content", 200, content, `\u0041`, provider.BadResponse, "answer larger than", 1},
		{"2xx of endless white space", 200, "", " ", provider.BadResponse, "answer larger than", 1},
		{"5xx of endless text", 503, "", "overloaded ", provider.Transient, "overloaded", 3},
		{"5xx of an endless JSON message", 500, `{"error":{"message":"`, "x", provider.Transient, "HTTP 500", 3},
		{"4xx of endless text", 400, "", "bad ", provider.Permanent, "bad bad", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeapi.NewStreamServer(t, tt.status, tt.prefix, tt.fill, fakeapi.HugeAnswer)
			p, _ := newTestProvider(t, testModel(srv.URL, `{"max_retries":2}`), nil)
			_, err := p.GenerateText(context.Background(), pngImage, "x")
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != tt.wantKind || !strings.Contains(pe.Error(), tt.wantMsg) {
				t.Fatalf("GenerateText err = %v, want %s containing %q", err, tt.wantKind, tt.wantMsg)
			}
			if n := srv.Requests.Load(); n != tt.wantRequests {
				t.Errorf("requests = %d, want %d", n, tt.wantRequests)
			}
			written := srv.Written.Load()
			t.Logf("the server wrote %d of %d bytes in %d requests", written, fakeapi.HugeAnswer, srv.Requests.Load())
			if limit := int64(64 << 20); written > limit {
				t.Errorf("the server wrote %d bytes, want the read to stop below %d", written, limit)
			}
		})
	}
}

// TestAnswerTextBounded: an answer within the body bound whose text is over
// provider.MaxTextBytes is a bad_response.
func TestAnswerTextBounded(t *testing.T) {
	for _, tt := range []struct {
		name    string
		n       int
		wantErr bool
	}{
		{"at the limit", provider.MaxTextBytes, false},
		{"over the limit", provider.MaxTextBytes + 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("a", tt.n) + `"}}]}`
			srv := newFakeServer(t, answer{status: 200, body: body})
			p, _ := newTestProvider(t, testModel(srv.URL, `{}`), nil)
			c, err := p.GenerateText(context.Background(), pngImage, "x")
			var pe *provider.Error
			switch {
			case tt.wantErr && (!errors.As(err, &pe) || pe.Kind != provider.BadResponse):
				t.Fatalf("err = %v, want a bad_response", err)
			case !tt.wantErr && (err != nil || len(c.Text) != tt.n):
				t.Fatalf("GenerateText = %d bytes, %v", len(c.Text), err)
			}
		})
	}
}
