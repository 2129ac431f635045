package fakeapi

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

// TestKey has the characters that encoders escape: '/' (JSON \/), '+' and
// '=' (URL %2B %3D), '<' '>' '&' (Go's JSON \u003c …, HTML), '"' and '\'.
const TestKey = `k3y/Secret+Value==<&>"\x`

// KeyForms returns key in each encoding a server may echo it in, by name.
func KeyForms(key string) map[string]string {
	jsonText := func(s string) string {
		b, _ := json.Marshal(s) // Go escapes < > & as \u003c \u003e \u0026
		return string(b[1 : len(b)-1])
	}
	each := func(f func(r rune) string) string {
		var b strings.Builder
		for _, r := range key {
			b.WriteString(f(r))
		}
		return b.String()
	}
	bytesOf := func(format string) string {
		var b strings.Builder
		for _, c := range []byte(key) {
			fmt.Fprintf(&b, format, c)
		}
		return b.String()
	}
	return map[string]string{
		"raw":                     key,
		"json":                    jsonText(key),
		"json slash escaped":      strings.ReplaceAll(jsonText(key), "/", `\/`),
		"json all \\u lower":      each(func(r rune) string { return jsonU(r, "%04x") }),
		"json all \\u upper":      each(func(r rune) string { return jsonU(r, "%04X") }),
		"json every other":        alternate(key, func(r rune) string { return jsonU(r, "%04x") }),
		"json twice":              jsonText(jsonText(strings.ReplaceAll(key, "/", `\/`))),
		"url query":               url.QueryEscape(key),
		"url path":                url.PathEscape(key),
		"url all lower":           bytesOf("%%%02x"),
		"url all upper":           bytesOf("%%%02X"),
		"url twice":               url.QueryEscape(url.QueryEscape(key)),
		"go quoted":               strings.Trim(fmt.Sprintf("%q", key), `"`),
		"go \\x all":              bytesOf(`\x%02x`),
		"html numeric":            each(func(r rune) string { return fmt.Sprintf("&#%d;", r) }),
		"html hex":                each(func(r rune) string { return fmt.Sprintf("&#x%X;", r) }),
		"json of url encoded":     jsonText(url.QueryEscape(key)),
		"url of json escaped":     url.QueryEscape(strings.ReplaceAll(jsonText(key), "/", `\/`)),
		"json \\u002f for only /": strings.ReplaceAll(key, "/", `\u002f`),
		"json \\u002F for only /": strings.ReplaceAll(key, "/", `\u002F`),
	}
}

// EncodedForm is a form of a key, of which Other bytes are not the key's
// (the text around it in one encoding, a mask, a separator).
type EncodedForm struct {
	Text  string
	Other int
}

// EncodedKeyForms returns, by name, the forms of key that are not escapes
// of each of its characters: in another case, in base64 and hex, a prefix
// or a suffix of provider.MinRedactedRun characters, split in two. A
// Redactor may leave a few characters of such a form (a base64 character
// that holds bits of the text around the key, a separator), never a run of
// provider.MinRedactedRun. key must be ASCII and at least 16 bytes long.
func EncodedKeyForms(key string) map[string]EncodedForm {
	n := provider.MinRedactedRun
	half := len(key) / 2
	return map[string]EncodedForm{
		"upper case":             {strings.ToUpper(key), 0},
		"lower case":             {strings.ToLower(key), 0},
		"swapped case":           {swapCase(key), 0},
		"base64 std":             {base64.StdEncoding.EncodeToString([]byte(key)), 0},
		"base64 url":             {base64.URLEncoding.EncodeToString([]byte(key)), 0},
		"base64 raw std":         {base64.RawStdEncoding.EncodeToString([]byte(key)), 0},
		"base64 raw url":         {base64.RawURLEncoding.EncodeToString([]byte(key)), 0},
		"base64 at offset 1":     {base64.StdEncoding.EncodeToString([]byte("u" + key + "!")), 6},
		"base64 at offset 2":     {base64.StdEncoding.EncodeToString([]byte("u:" + key + "!?")), 9},
		"base64 url at offset 2": {base64.RawURLEncoding.EncodeToString([]byte("u:" + key)), 3},
		"basic auth":             {base64.StdEncoding.EncodeToString([]byte("user:" + key)), 9},
		"hex lower":              {hex.EncodeToString([]byte(key)), 0},
		"hex upper":              {strings.ToUpper(hex.EncodeToString([]byte(key))), 0},
		"prefix":                 {key[:n], 0},
		"prefix upper case":      {strings.ToUpper(key[:n+1]), 0},
		"prefix json escaped":    {jsonEach(key[:n]), 0},
		"prefix url encoded":     {url.QueryEscape(key[:n+2]), 0},
		"suffix":                 {key[len(key)-n:], 0},
		"masked like openai":     {key[:n] + "****" + key[len(key)-4:], 8},
		"split by a line":        {key[:half] + "\n" + key[half:], 1},
		"split by a folded line": {key[:half] + "\r\n " + key[half:], 3},
		"split by a json \\n":    {key[:half] + `\n` + key[half:], 2},
		"split in two fields":    {key[:half] + `","` + key[half:], 3},
		"split in three":         {key[:n] + " " + key[n:2*n] + " " + key[2*n:], 2},
	}
}

// swapCase swaps the case of every other ASCII letter of s.
func swapCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case i%2 == 1:
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// jsonEach writes every rune of s as JSON's \uXXXX.
func jsonEach(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(jsonU(r, "%04x"))
	}
	return b.String()
}

// jsonU returns r as JSON's \uXXXX escape (a surrogate pair beyond the
// BMP), its hex digits formatted by format.
func jsonU(r rune, format string) string {
	if r <= 0xFFFF {
		return `\u` + fmt.Sprintf(format, r)
	}
	r -= 0x10000
	return `\u` + fmt.Sprintf(format, 0xD800+(r>>10)) + `\u` + fmt.Sprintf(format, 0xDC00+(r&0x3FF))
}

// alternate encodes every other rune of key with f.
func alternate(key string, f func(r rune) string) string {
	var b strings.Builder
	i := 0
	for _, r := range key {
		if i%2 == 0 {
			b.WriteString(f(r))
		} else {
			b.WriteRune(r)
		}
		i++
	}
	return b.String()
}

// AllKeyForms returns KeyForms and, for a key of 16 bytes or more, the
// texts of EncodedKeyForms.
func AllKeyForms(key string) map[string]string {
	forms := KeyForms(key)
	if len(key) >= 2*provider.MinRedactedRun {
		for name, form := range EncodedKeyForms(key) {
			forms[name] = form.Text
		}
	}
	return forms
}

// AssertNoKey fails t when err, any error its chain wraps, or their %+v and
// %#v renderings hold key in any of its AllKeyForms, or when err says nothing
// was redacted although the answer echoed the key.
func AssertNoKey(t testing.TB, err error, key string) {
	t.Helper()
	forms := AllKeyForms(key)
	r := provider.NewRedactor(key)
	for e := err; e != nil; e = errors.Unwrap(e) {
		for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
			for name, form := range forms {
				if strings.Contains(s, form) {
					t.Fatalf("key (%s) leaked in %T: %s", name, e, s)
				}
			}
			if r.Contains(s) {
				t.Fatalf("key leaked in %T: %s", e, s)
			}
		}
	}
}
