package provider_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

// endless is a reader of an unending answer that counts what was read.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += int64(len(p))
	return len(p), nil
}

func TestBoundedBody(t *testing.T) {
	tests := []struct {
		name     string
		body     string // "" = endless
		limit    int64
		truncate bool
		wantLen  int
		wantErr  bool
	}{
		{"under", "abc", 4, false, 3, false},
		{"exactly the limit", "abcd", 4, false, 4, false},
		{"one over", "abcde", 4, false, 4, true},
		{"endless", "", 1000, false, 1000, true},
		{"endless truncated", "", 1000, true, 1000, false},
		{"over, truncated", "abcdef", 4, true, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var src io.Reader = strings.NewReader(tt.body)
			inf := &endless{}
			if tt.body == "" {
				src = inf
			}
			b := &provider.BoundedBody{R: io.NopCloser(src), Limit: tt.limit, Truncate: tt.truncate}
			got, err := io.ReadAll(b)
			var tl *provider.AnswerTooLargeError
			if len(got) != tt.wantLen || errors.As(err, &tl) != tt.wantErr || (!tt.wantErr && err != nil) {
				t.Fatalf("ReadAll = %d bytes, %v; want %d bytes, error %v", len(got), err, tt.wantLen, tt.wantErr)
			}
			if b.N > tt.limit+1 || inf.n > tt.limit+1 {
				t.Fatalf("read %d (source %d) bytes, want at most %d", b.N, inf.n, tt.limit+1)
			}
			if tt.wantErr {
				if pe := provider.TooLargeAnswer(err); pe == nil || pe.Kind != provider.BadResponse || provider.Retryable(pe) {
					t.Fatalf("TooLargeAnswer = %v, want a bad_response that is not retried", pe)
				}
			}
		})
	}
}

func TestEmbedAnswerBytes(t *testing.T) {
	tests := []struct {
		name        string
		batch, dims int
		want        int64
	}{
		{"one vector, dimensions unknown", 1, 0, 16384*32 + 4096 + 65536},
		{"32 of 1024", 32, 1024, 32*(1024*32+4096) + 65536},
		{"dimensions over the bound count as the bound", 2, 1 << 20, 2*(16384*32+4096) + 65536},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.EmbedAnswerBytes(tt.batch, tt.dims); got != tt.want {
				t.Errorf("EmbedAnswerBytes(%d, %d) = %d, want %d", tt.batch, tt.dims, got, tt.want)
			}
		})
	}
}

func TestCheckText(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantBad bool
	}{
		{"plain", "a red square", false},
		{"empty", "", false},
		{"unicode", "un carré rouge — 赤い", false},
		{"NUL", "a\x00b", true},
		{"invalid UTF-8", "a\xffb", true},
		{"too long", strings.Repeat("a", provider.MaxTextBytes+1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := provider.CheckText(tt.text)
			var pe *provider.Error
			if bad := errors.As(err, &pe) && pe.Kind == provider.BadResponse; bad != tt.wantBad {
				t.Errorf("CheckText = %v, want bad_response %v", err, tt.wantBad)
			}
		})
	}
}
