package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/pace"
)

// quoteBytes is how much of an answer that is not JSON is scrubbed, before
// its first 200 characters are quoted in the error.
const quoteBytes = 16 << 10

// Client posts JSON requests to one service. It is safe for concurrent use;
// its requests are governed per model (provider/pace) by the governor built
// from the model's options.
type Client struct {
	// Retrier is the retry policy (max_retries). Tests may replace its Sleep
	// before the first call; it must not change afterwards.
	Retrier provider.Retrier

	// MaxAnswerBytes bounds the body of a 2xx answer: a longer one is a
	// BadResponse, read no further than that, and not retried. New sets it
	// for one vector of provider.MaxDimensions; set it before the first call.
	MaxAnswerBytes int64

	http     *http.Client
	key      string // "" = no Authorization header
	redactor *provider.Redactor
	header   http.Header
	timeout  time.Duration
	gov      *pace.Governor
}

// New returns a client for a model with options o (defaults applied, see
// provider.Options.WithDefaults) and API key key ("" = none). header holds
// extra request headers (may be nil).
func New(o provider.Options, key string, header http.Header) *Client {
	o = o.WithDefaults()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = o.MaxConcurrency // keep connections of concurrent requests alive
	return &Client{
		Retrier:  provider.Retrier{MaxRetries: *o.MaxRetries},
		http:     provider.NewHTTPClient(transport),
		key:      key,
		redactor: provider.NewRedactor(key),
		header:   header.Clone(),
		timeout:  time.Duration(o.Timeout),
		gov:      o.Governor(),
	}
}

// Post sends body, encoded once as JSON, to url and decodes a 2xx answer into
// out, retrying per c.Retrier. Each attempt waits for its turn from the
// model's governor and has the model's timeout. Every error is a *provider.Error (see the package
// documentation); an error when ctx ends wraps ctx.Err().
func (c *Client) Post(ctx context.Context, url string, body, out any) error {
	return c.PostWeighed(ctx, url, body, out, 0)
}

// PostWeighed is Post for a request estimated at tokens tokens (0 = not
// counted), which the governor paces under tokens_per_minute.
func (c *Client) PostWeighed(ctx context.Context, url string, body, out any, tokens int) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return c.errorf(provider.Permanent, "encode request: %v", err)
	}
	return c.Retrier.Do(ctx, func(ctx context.Context) error {
		return c.attempt(ctx, url, payload, out, tokens)
	})
}

// Pace is the model's governor, for status and metrics.
func (c *Client) Pace() *pace.Governor { return c.gov }

// attempt makes one request, classifies its outcome and tells the governor.
func (c *Client) attempt(ctx context.Context, url string, payload []byte, out any, tokens int) error {
	ticket, err := c.gov.Acquire(ctx, tokens)
	if err != nil {
		return c.stopped(err)
	}
	o := pace.Outcome{}
	defer func() { ticket.Done(o) }()
	err = c.exchange(ctx, url, payload, out, &o)
	var pe *provider.Error
	if errors.As(err, &pe) {
		o.Limited = pe.RateLimited
	}
	return err
}

// exchange makes one request and classifies its outcome, recording in o
// the answer's status and headers.
func (c *Client) exchange(ctx context.Context, url string, payload []byte, out any, o *pace.Outcome) error {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	defer func() { // no answer within the timeout: as slow as it gets
		o.TimedOut = o.Status == 0 && ctx.Err() == nil && actx.Err() != nil
	}()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return c.wrap(&provider.Error{Kind: provider.Permanent, Message: "invalid request: " + err.Error(), Err: err})
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}

	resp, err := c.http.Do(req)
	if err != nil {
		return c.ioError(ctx, actx, "request failed", err)
	}
	defer resp.Body.Close()
	o.Status, o.Header = resp.StatusCode, resp.Header
	if e := provider.Redirected(resp); e != nil {
		return c.wrap(e)
	}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The status decides; the start of the body gives the message.
		raw, err := io.ReadAll(&provider.BoundedBody{R: resp.Body, Limit: provider.MaxErrorBytes, Truncate: true})
		if err != nil {
			return responded(c.ioError(ctx, actx, "reading the answer failed", err))
		}
		msg := BodyMessage(raw)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		e := &provider.Error{
			Kind:       provider.ClassifyStatus(resp.StatusCode, msg),
			Status:     resp.StatusCode,
			Message:    msg,
			RetryAfter: ParseRetryAfter(resp.Header, time.Now()),
		}
		code := BodyCode(raw)
		e.RateLimited = provider.RateLimitedStatus(e.Status, e.RetryAfter, code)
		if provider.QuotaExhausted(e.Status, code) {
			e.Kind = provider.Permanent
		}
		return c.wrap(e)
	}
	raw, err := io.ReadAll(&provider.BoundedBody{R: resp.Body, Limit: c.MaxAnswerBytes})
	if tl := provider.TooLargeAnswer(err); tl != nil {
		return c.wrap(tl)
	}
	if err != nil {
		return responded(c.ioError(ctx, actx, "reading the answer failed", err))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return c.wrap(&provider.Error{Kind: provider.BadResponse,
			Message: fmt.Sprintf("invalid response: %v: %s", err, Truncate(c.Scrub(collapse(raw[:min(len(raw), quoteBytes)])), 200)), Err: err}) // scrubbed before the cut, which could halve a key
	}
	return nil
}

// ioError classifies a failed round trip or body read: the caller's ctx
// ended (wrapping its error), the attempt's own timeout, or an I/O error;
// all are Transient.
func (c *Client) ioError(ctx, attempt context.Context, what string, err error) *provider.Error {
	switch {
	case ctx.Err() != nil:
		return c.stopped(ctx.Err())
	case attempt.Err() != nil:
		// Not wrapping context.DeadlineExceeded: callers test errors.Is on it
		// to learn that their own context ended, which is not the case here.
		return c.wrap(&provider.Error{Kind: provider.Transient,
			Message: fmt.Sprintf("no answer within the timeout of %s", c.timeout)})
	}
	return c.wrap(&provider.Error{Kind: provider.Transient, Message: what + ": " + err.Error(), Err: err})
}

// responded marks e as the failure of a request the server answered (its
// status came; the body did not): the server is not unreachable.
func responded(e *provider.Error) *provider.Error {
	e.Responded = true
	return e
}

// stopped is the error of an attempt that ended because ctx did.
func (c *Client) stopped(err error) *provider.Error {
	return c.wrap(&provider.Error{Kind: provider.Transient, Message: err.Error(), Err: err})
}

// BadResponse is the error of a 2xx answer without usable vectors. Its
// message may quote the answer, so it is scrubbed like any other.
func (c *Client) BadResponse(format string, args ...any) *provider.Error {
	return c.errorf(provider.BadResponse, format, args...)
}

func (c *Client) errorf(k provider.Kind, format string, args ...any) *provider.Error {
	return c.wrap(provider.Errorf(k, format, args...))
}
