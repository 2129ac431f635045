package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// maxMessage bounds an error message taken from a response, which may be a
// whole HTML error page; errors rows should stay readable.
const maxMessage = 500

// classify turns the error of one attempt into a *provider.Error:
//
//   - a redirect (3xx), which is not followed: provider.Redirected;
//   - an HTTP error answer (go-openai *APIError or *RequestError): its status,
//     provider.ClassifyStatus(status, message), the server's message and
//     Retry-After; a 429 (or a 503 with Retry-After) is RateLimited, except
//     OpenAI's insufficient_quota, which is Permanent;
//   - the caller's ctx ended: Transient, wrapping ctx's error;
//   - the attempt's own timeout, or an I/O error: Transient, status 0;
//   - a 2xx answer over its bound (provider.MaxChatAnswerBytes), or one
//     go-openai could not decode: BadResponse;
//   - anything else (go-openai refused to build the request): Permanent.
//
// ctx is the caller's context, attempt the attempt's (with its timeout).
func (p *Provider) classify(ctx, attempt context.Context, ex *exchange, err error) *provider.Error {
	e := &provider.Error{}
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case ex.redirect != nil:
		e = ex.redirect
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		e.Status = apiErr.HTTPStatusCode
		e.Message = apiErr.Message
		e.Kind = provider.ClassifyStatus(e.Status, e.Message)
		e.RetryAfter = ex.retryAfter
		e.Err = err
		code := apiErr.Type
		if c, ok := apiErr.Code.(string); ok && c != "" {
			code = c
		}
		e.RateLimited = provider.RateLimitedStatus(e.Status, e.RetryAfter, code)
		if provider.QuotaExhausted(e.Status, code) {
			e.Kind = provider.Permanent
		}
	case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
		e.Status = reqErr.HTTPStatusCode
		e.Message = httpjson.BodyMessage(reqErr.Body)
		e.Kind = provider.ClassifyStatus(e.Status, e.Message)
		e.RetryAfter = ex.retryAfter
		e.Err = err
		code := httpjson.BodyCode(reqErr.Body)
		e.RateLimited = provider.RateLimitedStatus(e.Status, e.RetryAfter, code)
		if provider.QuotaExhausted(e.Status, code) {
			e.Kind = provider.Permanent
		}
	case ex.tooLarge != nil:
		e = provider.TooLargeAnswer(ex.tooLarge)
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
		e.Responded = ex.status != 0 // the answer began: its body was cut
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
	e.Message = httpjson.Truncate(p.scrub(e.Message), maxMessage)
	e.Err = p.scrubErr(e.Err)
	return e
}

// badResponse is the error of a 2xx answer without a usable completion. Its
// message may quote the answer, so it is scrubbed like any other.
func (p *Provider) badResponse(format string, args ...any) *provider.Error {
	e := provider.Errorf(provider.BadResponse, format, args...)
	e.Message = httpjson.Truncate(p.scrub(e.Message), maxMessage)
	return e
}

// scrub removes the API key from s, in every encoding (provider.Redactor).
func (p *Provider) scrub(s string) string { return p.redact.Redact(s) }

func (p *Provider) scrubErr(err error) error { return p.redact.RedactErr(err) }
