package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/pgimageai/pgimageai/provider"
)

// maxMessage bounds an error message taken from a response, which may be a
// whole HTML error page; errors rows should stay readable.
const maxMessage = 500

// classify turns the error of one attempt into a *provider.Error:
//
//   - an HTTP error answer (go-openai *APIError or *RequestError): its status,
//     provider.StatusKind(status), the server's message and Retry-After;
//   - the caller's ctx ended: Transient, wrapping ctx's error;
//   - the attempt's own timeout, or an I/O error: Transient, status 0;
//   - a 2xx answer go-openai could not decode: BadResponse;
//   - anything else (go-openai refused to build the request): Permanent.
//
// ctx is the caller's context, attempt the attempt's (with its timeout).
func (p *Provider) classify(ctx, attempt context.Context, ex *exchange, err error) *provider.Error {
	e := &provider.Error{}
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		e.Status = apiErr.HTTPStatusCode
		e.Kind = provider.StatusKind(e.Status)
		e.Message = apiErr.Message
		e.RetryAfter = ex.retryAfter
		e.Err = err
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		e.Status = reqErr.HTTPStatusCode
		e.Kind = provider.StatusKind(e.Status)
		e.Message = bodyMessage(reqErr.Body)
		e.RetryAfter = ex.retryAfter
		e.Err = err
	case ctx.Err() != nil:
		e.Kind = provider.Transient
		e.Message = ctx.Err().Error()
		e.Err = ctx.Err()
	case attempt.Err() != nil:
		// Not wrapping context.DeadlineExceeded: callers test errors.Is on it
		// to learn that their own context ended, which is not the case here.
		e.Kind = provider.Transient
		e.Message = fmt.Sprintf("no answer within the timeout of %s", p.timeout)
	case ex.ioErr != nil:
		e.Kind = provider.Transient
		e.Message = "request failed: " + ex.ioErr.Error()
		e.Err = err
	case ex.sent:
		e.Kind = provider.BadResponse
		e.Message = "invalid response: " + err.Error()
		e.Err = err
	default:
		e.Kind = provider.Permanent
		e.Message = "invalid request: " + err.Error()
		e.Err = err
	}
	if e.Message == "" && e.Status != 0 {
		e.Message = http.StatusText(e.Status)
	}
	e.Message = truncate(p.scrub(e.Message), maxMessage)
	e.Err = p.scrubErr(e.Err)
	return e
}

// badResponse is the error of a 2xx answer without a usable completion. Its
// message may quote the answer, so it is scrubbed like any other.
func (p *Provider) badResponse(format string, args ...any) *provider.Error {
	e := provider.Errorf(provider.BadResponse, format, args...)
	e.Message = truncate(p.scrub(e.Message), maxMessage)
	return e
}

// redacted replaces the API key wherever it appears.
const redacted = "[REDACTED]"

// scrub removes the API key from s. A gateway may echo request headers in
// its error body, so every message taken from outside passes here.
func (p *Provider) scrub(s string) string {
	if p.key == "" {
		return s
	}
	return strings.ReplaceAll(s, p.key, redacted)
}

// scrubErr returns err, or a plain error with err's scrubbed text when that
// text contains the key, so that not even the unwrapped chain leaks it.
func (p *Provider) scrubErr(err error) error {
	if err == nil || p.key == "" || !strings.Contains(err.Error(), p.key) {
		return err
	}
	return errors.New(p.scrub(err.Error()))
}

// bodyMessage extracts a message from an error body that go-openai could not
// decode as {"error":{"message":…}}: Ollama's {"error":"…"}, {"message":"…"},
// FastAPI's {"detail":"…"}, or else the text itself, whitespace collapsed.
func bodyMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var s string
		var obj struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case v.Message != "":
			return v.Message
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			return s
		case len(v.Detail) > 0:
			return string(v.Detail)
		}
	}
	return strings.Join(strings.Fields(string(body)), " ")
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
