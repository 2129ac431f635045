package provider_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/internal/fakeapi"
)

// TestRedactForms: each form of the key, in a short message and amid 4 KiB
// of other text (where the escapes are tried only at the places a match can
// start, rather than in one pass of the automaton), is redacted whole.
func TestRedactForms(t *testing.T) {
	pad := strings.Repeat(".", 4<<10)
	for _, key := range []string{fakeapi.TestKey, "sk-0123456789abcdef", "clé-ünïcødé-😀-key", "with space+plus"} {
		r := provider.NewRedactor(key)
		for name, form := range fakeapi.KeyForms(key) {
			t.Run(fmt.Sprintf("%s/%s", key, name), func(t *testing.T) {
				in := `{"error":"bad key: Bearer ` + form + `, try again"}`
				out := r.Redact(in)
				if strings.Contains(out, form) || !strings.Contains(out, "Bearer "+provider.Redacted+", try again") {
					t.Errorf("Redact(%s) = %s", in, out)
				}
				if out := r.Redact(pad + in + pad); out != pad+`{"error":"bad key: Bearer `+provider.Redacted+`, try again"}`+pad {
					t.Errorf("Redact(4 KiB + %s + 4 KiB) = …%s…", in, strings.Trim(out, "."))
				}
				if !r.Contains(in) || r.Contains(out) {
					t.Errorf("Contains(in) = %v, Contains(out) = %v", r.Contains(in), r.Contains(out))
				}
			})
		}
	}
}

func TestRedactKeepsOtherText(t *testing.T) {
	tests := []struct {
		name, key, in, want string
	}{
		{"no key", "sk-abc", "nothing to see", "nothing to see"},
		{"empty key", "", "sk-abc", "sk-abc"},
		{"two occurrences", "sk-abc", "sk-abc and sk%2Dabc", provider.Redacted + " and " + provider.Redacted},
		{"a prefix of the key only", "sk-abcdef", "sk-abc", "sk-abc"},
		{"other escapes kept", "sk-abc", `a\/b %41 \u0041`, `a\/b %41 \u0041`},
		{"not text", "\xff\xfekey", "x\xff\xfekey", "x" + provider.Redacted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.NewRedactor(tt.key).Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	var nilR *provider.Redactor
	if got := nilR.Redact("x"); got != "x" {
		t.Errorf("nil Redactor: %q", got)
	}
}

type leakyErr struct{ secret string }

func (e *leakyErr) Error() string { return "opaque" }

func TestRedactErr(t *testing.T) {
	r := provider.NewRedactor(fakeapi.TestKey)
	escaped := strings.ReplaceAll(fakeapi.TestKey, "/", `\/`)
	inner := fmt.Errorf("read: %s", escaped)
	tests := []struct {
		name     string
		err      error
		wantSame bool
	}{
		{"nil", nil, true},
		{"clean", errors.New("clean"), true},
		{"in the text", fmt.Errorf("outer: %w", inner), false},
		{"only in a wrapped field", fmt.Errorf("outer: %w", &leakyErr{secret: url.QueryEscape(fakeapi.TestKey)}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.RedactErr(tt.err)
			if (got == tt.err) != tt.wantSame {
				t.Fatalf("RedactErr returned the same error: %v, want %v", got == tt.err, tt.wantSame)
			}
			for e := got; e != nil; e = errors.Unwrap(e) {
				for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
					if r.Contains(s) {
						t.Fatalf("key in %T: %s", e, s)
					}
				}
			}
		})
	}
}

// FuzzRedact: a key whose characters are each written in a random one of
// their encodings, between any text, is found and replaced.
func FuzzRedact(f *testing.F) {
	f.Add(fakeapi.TestKey, "prefix ", " suffix", uint64(1))
	f.Add("sk-0123456789", "", "", uint64(42))
	f.Add("a/b", `\\`, "%", uint64(7))
	f.Add("ü😀 x", "&#", ";", uint64(99))
	f.Fuzz(func(t *testing.T, key, prefix, suffix string, seed uint64) {
		if !utf8.ValidString(key) || utf8.RuneCountInString(key) < 2 || strings.ContainsAny(key, "[]REDACT") {
			t.Skip()
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		var b strings.Builder
		for _, r := range key {
			b.WriteString(encodeRune(r, rng.IntN(10)))
		}
		enc := b.String()
		r := provider.NewRedactor(key)
		in := prefix + enc + suffix
		if !r.Contains(in) {
			t.Fatalf("Contains(%q) = false for key %q", in, key)
		}
		if out := r.Redact(in); strings.Contains(out, enc) || !strings.Contains(out, provider.Redacted) {
			t.Fatalf("Redact(%q) = %q for key %q", in, out, key)
		}
	})
}

// encodeRune writes r in encoding n of the forms Redactor knows.
func encodeRune(r rune, n int) string {
	var buf [utf8.UTFMax]byte
	raw := buf[:utf8.EncodeRune(buf[:], r)]
	perByte := func(format string) string {
		var b strings.Builder
		for _, c := range raw {
			fmt.Fprintf(&b, format, c)
		}
		return b.String()
	}
	switch n {
	case 1:
		if r > 0xFFFF {
			hi, lo := 0xD800+((r-0x10000)>>10), 0xDC00+((r-0x10000)&0x3FF)
			return fmt.Sprintf(`\u%04x\u%04X`, hi, lo)
		}
		return fmt.Sprintf(`\u%04x`, r)
	case 2:
		return perByte("%%%02X")
	case 3:
		return perByte("%%25%02x")
	case 4:
		return perByte(`\x%02x`)
	case 5:
		return fmt.Sprintf("&#%d;", r)
	case 6:
		return fmt.Sprintf("&#x%x;", r)
	case 7:
		if r == '/' || r == '"' || r == '\\' {
			return `\\` + string(r)
		}
	case 8:
		if r == ' ' {
			return "+"
		}
	}
	return string(raw)
}

// TestRedactEncodings: the key in another case, in base64 and hex, as a
// prefix or suffix of MinRedactedRun characters, or split in pieces leaves
// no run of MinRedactedRun characters of its form behind.
func TestRedactEncodings(t *testing.T) {
	for _, key := range []string{fakeapi.TestKey, "sk-proj-0123456789abcdefGHIJKL", "gsk_Z9yX8wV7uT6sR5qP4oN3mL2kJ1iH"} {
		r := provider.NewRedactor(key)
		for name, form := range fakeapi.EncodedKeyForms(key) {
			t.Run(fmt.Sprintf("%s/%s", key, name), func(t *testing.T) {
				const before, after = `{"error":"bad key: Bearer `, `, try again"}`
				out := r.Redact(before + form.Text + after)
				if strings.Contains(out, form.Text) || !strings.Contains(out, provider.Redacted) || r.Contains(out) {
					t.Fatalf("Redact(%s) = %s", form.Text, out)
				}
				if !strings.HasPrefix(out, before) || !strings.HasSuffix(out, after) {
					t.Fatalf("Redact(%s) = %s: the text around the key changed", form.Text, out)
				}
				left := strings.ReplaceAll(out[len(before):len(out)-len(after)], provider.Redacted, "")
				if len(left)-form.Other >= provider.MinRedactedRun {
					t.Fatalf("Redact(%s) = %s: %q left of the form", form.Text, out, left)
				}
			})
		}
	}
}

// TestRedactRuns: what is and is not a run of the key.
func TestRedactRuns(t *testing.T) {
	const key = "sk-proj-0123456789abcdef"
	tests := []struct {
		name, in, want string
	}{
		{"seven characters kept", "sk-proj", "sk-proj"},
		{"eight characters redacted", "x sk-proj- y", "x " + provider.Redacted + " y"},
		{"a run from the middle", "id=6789ABCDEF.", "id=" + provider.Redacted + "."},
		{"two runs of one key", "sk-proj-01 and 89abcdef", provider.Redacted + " and " + provider.Redacted},
		{"fifteen hex digits kept", "736b2d70726f6a2", "736b2d70726f6a2"},
		{"the key's letters in other words kept", "project abcdef", "project abcdef"},
		{"escaped prefix", `sk\u002dproj\u002d0`, provider.Redacted},
		{"escaped prefix of seven kept", `sk\u002dproj`, `sk\u002dproj`},
		{"escaped after a run of backslashes longer than a try", strings.Repeat(`\`, 5000) + `\u0073k-proj-0`, strings.Repeat(`\`, 5000) + provider.Redacted},
		{"escaped after a run of %5C", strings.Repeat(`%5C`, 2000) + `u0073k-proj-0`, strings.Repeat(`%5C`, 1999) + provider.Redacted},
	}
	r := provider.NewRedactor(key)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := r.Contains(tt.in); got != (tt.in != tt.want) {
				t.Errorf("Contains(%q) = %v", tt.in, got)
			}
		})
	}
}

// TestRedactHostileTextIsLinear: text made of what escapes start with (runs
// of backslashes, of %5C, of %25…5C; a backslash or an ampersand every two
// or three bytes) costs Redact little: 32 KiB within 1 s (about 10 ms here;
// under -race 16 KiB within 10 s, about 3 s). A try of the expression at
// each backslash of a run, running to the end of the run, took 1–12 s for
// 16 KiB.
func TestRedactHostileTextIsLinear(t *testing.T) {
	size, bound := 32<<10, time.Second
	if raceEnabled {
		size, bound = 16<<10, 10*time.Second
	}
	r := provider.NewRedactor("sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUV")
	for _, unit := range []string{`\`, `%5C`, `%2525255C`, `\u`, `%5C%5Cx`, "s&#"} {
		t.Run(unit, func(t *testing.T) {
			text := strings.Repeat(unit, size/len(unit))
			start := time.Now()
			r.Redact(text)
			if d := time.Since(start); d > bound {
				t.Errorf("Redact of %d KiB of %q: %s, want within %s", size>>10, unit, d, bound)
			}
		})
	}
}

// TestRedactLongKey: a key too long for its prefixes to nest in the
// regular expression is still redacted whole and by its runs.
func TestRedactLongKey(t *testing.T) {
	key := strings.Repeat("0123456789abcdefghij", 40) // 800 characters
	r := provider.NewRedactor(key)
	for _, in := range []string{key, url.QueryEscape(strings.ToUpper(key)), key[100:120]} {
		if out := r.Redact("<" + in + ">"); out != "<"+provider.Redacted+">" {
			t.Errorf("Redact(%.40q…) = %.40q…", in, out)
		}
	}
}

// BenchmarkRedact: Redact runs on every error message taken from a
// provider (bounded at 16 KiB); these are its costs on a message of 1 and
// 16 KiB without the key, with JSON escapes (the regular expression runs)
// and holding the key.
func BenchmarkRedact(b *testing.B) {
	const key = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUV"
	plain := `{"error":{"message":"Incorrect API key provided: sk-proj-****. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error"}} `
	r := provider.NewRedactor(key)
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, tt := range []struct{ name, text string }{
			{"plain", plain},
			{"escapes", strings.ReplaceAll(plain, "/", `\/`)},
			{"key", plain + key + " " + url.QueryEscape(key)},
		} {
			text := strings.Repeat(tt.text, size/len(tt.text)+1)[:size]
			b.Run(fmt.Sprintf("%s/%dKiB", tt.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					r.Redact(text)
				}
			})
		}
	}
}
