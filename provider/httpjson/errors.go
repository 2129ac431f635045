package httpjson

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/pgimageai/pgimageai/provider"
)

// maxMessage bounds an error message taken from a response, which may be a
// whole HTML error page; errors rows should stay readable.
const maxMessage = 500

// wrap scrubs e in place (message and chain) and bounds its message.
func (c *Client) wrap(e *provider.Error) *provider.Error {
	e.Message = Truncate(c.Scrub(e.Message[:min(len(e.Message), quoteBytes)]), maxMessage)
	e.Err = c.scrubErr(e.Err)
	return e
}

// Scrub removes the API key from s,
// in every encoding (provider.Redactor). A gateway may echo request headers
// in its error body, so every message taken from outside passes here.
func (c *Client) Scrub(s string) string { return c.redactor.Redact(s) }

func (c *Client) scrubErr(err error) error { return c.redactor.RedactErr(err) }

// BodyMessage extracts the message of an error answer: OpenAI's, llama.cpp's
// and newer vLLM's {"error":{"message":…}}, Ollama's {"error":"…"}, Cohere's
// and older vLLM's {"message":"…"}, Voyage's and Jina's (FastAPI)
// {"detail":"…"} (a structured detail as its JSON text), or else the body
// itself, whitespace collapsed.
func BodyMessage(body []byte) string {
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
		case len(v.Detail) > 0 && string(v.Detail) != "null":
			return collapse(v.Detail)
		}
	}
	return collapse(body)
}

// BodyCode extracts the error code of an error answer: OpenAI's
// {"error":{"code":"…","type":"…"}} (the code, else the type), or "".
func BodyCode(body []byte) string {
	var v struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if c, ok := v.Error.Code.(string); ok && c != "" {
		return c
	}
	return v.Error.Type
}

// collapse returns b as text with runs of white space made single spaces.
func collapse(b []byte) string { return strings.Join(strings.Fields(string(b)), " ") }

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
