package fakeapi

import (
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

// AssertNoKey fails t when err, any error its chain wraps, or their %+v and
// %#v renderings hold key in any of its KeyForms, or when err says nothing
// was redacted although the answer echoed the key.
func AssertNoKey(t testing.TB, err error, key string) {
	t.Helper()
	forms := KeyForms(key)
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
