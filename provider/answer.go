package provider

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Bounds of what a provider may send: every answer is bounded
// before it is read, so that no server can make the bridge hold more than a
// few MiB per call or store an answer of any size.
const (
	// MaxErrorBytes bounds what is read of an error answer (HTTP status
	// outside 2xx): the status decides what happens, the body only gives the
	// message, of which errors rows keep 500 characters. The rest is not read.
	MaxErrorBytes = 64 << 10

	// MaxChatAnswerBytes bounds the body of a chat completion answer: room
	// for a MaxTextBytes text escaped by JSON, and its envelope.
	MaxChatAnswerBytes = 2 << 20

	// MaxTextBytes bounds the text of an answer (AI_IMAGE_COMPLETE): far
	// more than any caption or structured answer, far less than a target
	// table should be asked to hold per row.
	MaxTextBytes = 256 << 10

	// MaxDimensions bounds the length of a vector (AI_IMAGE_EMBED) when the
	// model's options do not name its dimensions: above the widest embedding
	// models (4096–8192) and pgvector's 16,000.
	MaxDimensions = 16384

	// jsonValueBytes is the most bytes one vector value takes in a JSON
	// answer, "-0.012345678901234567e-05, " and the like.
	jsonValueBytes = 32
	// jsonItemBytes is the envelope of one vector in an answer (index,
	// object, per-input metadata), and jsonAnswerBytes the answer's own.
	jsonItemBytes   = 4 << 10
	jsonAnswerBytes = 64 << 10
)

// EmbedAnswerBytes returns the body limit of an embeddings answer to a
// request of batch inputs whose vectors have dims values (0 = not known:
// MaxDimensions).
func EmbedAnswerBytes(batch, dims int) int64 {
	if dims <= 0 || dims > MaxDimensions {
		dims = MaxDimensions
	}
	return int64(max(batch, 1))*(int64(dims)*jsonValueBytes+jsonItemBytes) + jsonAnswerBytes
}

// AnswerTooLargeError is the error of reading past a BoundedBody's limit.
type AnswerTooLargeError struct {
	Limit int64
}

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("answer larger than %d bytes", e.Limit)
}

// BoundedBody reads at most Limit bytes of R (a response body), and one
// more to learn that there are more: then Read returns an
// *AnswerTooLargeError, or io.EOF when Truncate is set (an error answer,
// whose start is enough). Nothing past Limit+1 bytes is ever read from R, so
// an endless answer costs no more than Limit+1 bytes. N counts the bytes
// read from R. A BoundedBody is not safe for concurrent use.
type BoundedBody struct {
	R        io.ReadCloser
	Limit    int64
	Truncate bool
	N        int64
}

// Read implements io.Reader.
func (b *BoundedBody) Read(p []byte) (int, error) {
	if b.N > b.Limit {
		return 0, b.over()
	}
	if rest := b.Limit + 1 - b.N; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.R.Read(p)
	b.N += int64(n)
	if b.N > b.Limit {
		return n - int(b.N-b.Limit), b.over()
	}
	return n, err
}

// Close closes R.
func (b *BoundedBody) Close() error { return b.R.Close() }

func (b *BoundedBody) over() error {
	if b.Truncate {
		return io.EOF
	}
	return &AnswerTooLargeError{Limit: b.Limit}
}

// TooLargeAnswer returns the BadResponse error of an answer over a bound,
// when err is (or wraps) an *AnswerTooLargeError, or nil.
func TooLargeAnswer(err error) *Error {
	var tl *AnswerTooLargeError
	if !errors.As(err, &tl) {
		return nil
	}
	return &Error{Kind: BadResponse, Message: "invalid response: " + tl.Error() + "; not read further", Err: tl}
}

// CheckText returns BadResponse when text is longer than MaxTextBytes.
func CheckText(text string) error {
	switch {
	case len(text) > MaxTextBytes:
		return Errorf(BadResponse, "answer text of %d bytes is over the limit of %d bytes", len(text), MaxTextBytes)
	case strings.IndexByte(text, 0) >= 0:
		// PostgreSQL's text cannot hold a NUL: the write would fail every
		// time and hold the lane.
		return Errorf(BadResponse, "answer text contains a NUL character (byte %d), which a text column cannot store", strings.IndexByte(text, 0))
	case !utf8.ValidString(text):
		return Errorf(BadResponse, "answer text is not valid UTF-8")
	}
	return nil
}

// CheckVectorLength returns BadResponse when v has more than MaxDimensions
// values.
func CheckVectorLength(v []float32) error {
	if len(v) > MaxDimensions {
		return Errorf(BadResponse, "vector of %d values is over the limit of %d", len(v), MaxDimensions)
	}
	return nil
}
