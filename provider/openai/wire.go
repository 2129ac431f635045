package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// This file is the one place where pgimageai touches the HTTP exchanges that
// go-openai makes: doer is go-openai's HTTPDoer. For each attempt it
//
//   - repairs the request body where go-openai's `omitempty` tags lose
//     information the wire must carry (wireFix), and
//   - records the response's status and Retry-After, and any I/O error, in
//     the attempt's exchange, since go-openai's errors carry no headers;
//   - bounds the response body before go-openai reads it (go-openai reads
//     success and error bodies without a limit): a 2xx answer to
//     provider.MaxChatAnswerBytes, past which reading fails and the attempt
//     is a bad_response; an error answer to provider.MaxErrorBytes, past
//     which it reads as ended (its status decides, its start is the message).

// exchange is the state of one HTTP attempt, carried to doer by the request's
// context. go-openai calls Do and reads the body on the caller's goroutine, so
// the fields need no lock.
type exchange struct {
	fix   *wireFix // nil = no repair of go-openai's body
	image *spliced // nil = no image to write into the body

	sent       bool                          // a request went out
	status     int                           // the response's status; 0 = none
	header     http.Header                   // the response's headers; nil = none
	retryAfter time.Duration                 // the response's Retry-After; 0 = none
	ioErr      error                         // the round trip's error, or reading the response body's
	tooLarge   *provider.AnswerTooLargeError // the answer passed its bound
	body       *provider.BoundedBody         // the response body as read
	redirect   *provider.Error               // the answer redirected (provider.Redirected)
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// wireFix restores what go-openai v1.43's request structs drop:
//
//   - ChatMessagePart.Text is `json:"text,omitempty"`, so an empty prompt
//     yields {"type":"text"}, which Ollama rejects. Every text part gets its
//     "text", "" included.
//   - ChatCompletionRequest.Temperature and TopP are `float32,omitempty`, so a
//     configured 0 is not sent and the server's default (1) applies. Configured
//     values are set on the top-level object.
//
// The body is edited structurally (json.RawMessage, key presence only), never
// by text search, so no prompt or schema content can be mistaken for structure.
type wireFix struct {
	emptyText   bool     // a text part may lack "text"
	temperature *float32 // configured temperature, or nil
	topP        *float32 // configured top_p, or nil
}

// needed reports whether go-openai's body lacks something; the rewrite costs
// a parse of the whole body (data URL included), so it is done only then.
func (f wireFix) needed() bool {
	zero := func(p *float32) bool { return p != nil && *p == 0 }
	return f.emptyText || zero(f.temperature) || zero(f.topP)
}

// apply returns body with the fixes applied.
func (f wireFix) apply(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	for key, v := range map[string]*float32{"temperature": f.temperature, "top_p": f.topP} {
		if v != nil {
			b, err := json.Marshal(*v) // encoded as float32, like go-openai does
			if err != nil {
				return nil, err
			}
			top[key] = b
		}
	}
	if f.emptyText {
		msgs, err := fillTextParts(top["messages"])
		if err != nil {
			return nil, err
		}
		top["messages"] = msgs
	}
	return json.Marshal(top)
}

// fillTextParts adds "text":"" to every {"type":"text"} part of the messages
// whose content is an array of parts.
func fillTextParts(raw json.RawMessage) (json.RawMessage, error) {
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	for _, m := range msgs {
		content := bytes.TrimSpace(m["content"])
		if len(content) == 0 || content[0] != '[' {
			continue
		}
		var parts []map[string]json.RawMessage
		if err := json.Unmarshal(content, &parts); err != nil {
			return nil, fmt.Errorf("content: %w", err)
		}
		for _, p := range parts {
			if string(p["type"]) == `"text"` && p["text"] == nil {
				p["text"] = json.RawMessage(`""`)
			}
		}
		b, err := json.Marshal(parts)
		if err != nil {
			return nil, err
		}
		m["content"] = b
	}
	return json.Marshal(msgs)
}

// spliced is the image of a request whose body go-openai marshalled with
// placeholder (a JSON string of letters, digits and '-') where the data URL
// goes: the image is base64-encoded once, straight into the body, rather
// than into a data URL string that json.Marshal then copies and scans
// (for an 8 KB image that was most of the request's CPU).
type spliced struct {
	placeholder string
	format      magic.Format
	data        []byte
}

// into returns body with the placeholder's one occurrence replaced by the
// image's data URL. The placeholder is random per provider, so no prompt
// or option can contain it; a body without exactly one is an error.
func (s *spliced) into(body []byte) ([]byte, error) {
	quoted := `"` + s.placeholder + `"`
	i := bytes.Index(body, []byte(quoted))
	if i < 0 || bytes.Contains(body[i+len(quoted):], []byte(quoted)) {
		return nil, errors.New("the image's placeholder is not in the body exactly once")
	}
	out := make([]byte, 0, len(body)-len(s.placeholder)+magic.DataURLLen(s.format, s.data))
	out = append(out, body[:i+1]...)
	out = magic.AppendDataURL(out, s.format, s.data)
	return append(out, body[i+len(quoted)-1:]...), nil
}

// doer is the HTTPDoer handed to go-openai. It is safe for concurrent use.
type doer struct {
	client    *http.Client
	maxAnswer int64 // bound of a 2xx body
}

// Do implements go-openai's HTTPDoer.
func (d *doer) Do(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		ex = &exchange{} // bounded all the same
	}
	if (ex.fix != nil || ex.image != nil) && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err == nil && ex.fix != nil {
			body, err = ex.fix.apply(body)
		}
		if err == nil && ex.image != nil {
			body, err = ex.image.into(body)
		}
		if err != nil {
			return nil, fmt.Errorf("rewrite request body: %w", err)
		}
		req = req.WithContext(req.Context()) // a shallow copy, not the caller's request
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	ex.sent = true
	resp, err := d.client.Do(req)
	if err != nil {
		ex.ioErr = err
		return nil, err
	}
	ex.status = resp.StatusCode
	ex.header = resp.Header
	if e := provider.Redirected(resp); e != nil {
		resp.Body.Close()
		ex.redirect = e
		return nil, e
	}
	ex.retryAfter = httpjson.ParseRetryAfter(resp.Header, time.Now())
	ex.body = &provider.BoundedBody{R: resp.Body, Limit: d.maxAnswer}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ex.body.Limit, ex.body.Truncate = provider.MaxErrorBytes, true
	}
	resp.Body = &watchedBody{ReadCloser: ex.body, ex: ex}
	return resp, nil
}

// watchedBody records a read error of the response body (a connection cut
// mid-answer), which go-openai would otherwise report like invalid JSON.
type watchedBody struct {
	io.ReadCloser
	ex *exchange
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tl *provider.AnswerTooLargeError
	switch {
	case errors.As(err, &tl):
		b.ex.tooLarge = tl
	case err != nil && err != io.EOF:
		b.ex.ioErr = err
	}
	return n, err
}
