package provider

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret wherever a Redactor finds it.
const Redacted = "[REDACTED]"

// Redactor removes one secret (an API key) from text, in every encoding a
// server or a library may echo it in.
//
// Runs of the key's bytes, found by a scan in one pass (redactscan.go):
//
//   - any MinRedactedRun (8) or more consecutive characters of the key, its
//     ASCII letters in either case: the key itself, in upper or lower case,
//     a prefix or suffix a server echoes ("sk-proj-abcd…"), each piece of a
//     key split across a line or two fields;
//   - its hexadecimal (either case), a run of at least 16 digits;
//   - its base64, standard or URL alphabet, padded or not, at each of the
//     three offsets it can have inside a longer encoded text: a run of at
//     least 11 characters (8 bytes of the key).
//
// The whole key or a prefix of at least MinRedactedRun characters, each
// character, independently of the others:
//
//   - as itself, in either case;
//   - JSON-escaped: \uXXXX (either case of hex; a surrogate pair beyond the
//     BMP), and \/ \" \\ \b \f \n \r \t for their characters — with any
//     number of backslashes, so a string escaped twice is caught too, and
//     backslashes URL-encoded (%5C);
//   - as Go's or Python's \xXX escapes of its UTF-8 bytes;
//   - URL-encoded: %XX per UTF-8 byte (either case), %25XX when encoded
//     twice, and + for a space (form encoding);
//   - as an HTML character reference (&#DDD; &#xHH; &amp; &lt; …).
//
// A key shorter than MinRedactedRun bytes is redacted only whole. The
// escapes are a regular expression compiled once per key; Go's regexp runs
// in time linear in the text, so no answer can make it slow. It is tried,
// anchored, only where a match can start (the key's first character or an
// escape's), and only on text that holds an escape's first character
// (\ % & +): anything else is the scan's. A Redactor is safe for concurrent use; a nil one, or
// one of an empty key, changes nothing.
type Redactor struct {
	key string
	re  *regexp.Regexp // anchored: ^(?:forms of the key)
	// unanchored is re without ^, for one pass over text where tries of re
	// would be dense.
	unanchored *regexp.Regexp
	scan       *scanner
	// escapes are the bytes an escape can start with: the regular
	// expression cannot match text without one that the scan does not.
	escapes string
	// starts are the bytes a match of re can start with: re, anchored, is
	// tried only there (Go's regexp would run its whole automaton over
	// every byte, some 175 ns a byte for a key of 64 characters).
	starts string
	// window bounds one anchored try: 64 bytes and 48 a character, room
	// for any form above escaped several times over.
	window int
}

// NewRedactor returns the Redactor of key ("" = none).
func NewRedactor(key string) *Redactor {
	if key == "" {
		return &Redactor{}
	}
	r := &Redactor{key: key, scan: newScanner(key)}
	if !utf8.ValidString(key) { // not text: only its raw bytes can be matched
		return r
	}
	r.escapes = `\%&`
	if strings.ContainsRune(key, ' ') {
		r.escapes += "+"
	}
	runes := []rune(key)
	need := len(runes) // a prefix of need characters or more is redacted
	if len(runes) <= maxNestedRunes {
		need = min(need, MinRedactedRun)
	}
	r.starts = r.escapes
	for c := runes[0]; ; {
		r.starts += string(c)
		if c = unicode.SimpleFold(c); c == runes[0] {
			break
		}
	}
	r.window = 64 + 48*len(runes)
	var b strings.Builder
	b.WriteString("^")
	for i, c := range runes {
		if i >= need {
			b.WriteString("(?:")
		}
		b.WriteString("(?:")
		b.WriteString(strings.Join(runeForms(c), "|"))
		b.WriteString(")")
	}
	b.WriteString(strings.Repeat(")?", len(runes)-need))
	r.re = regexp.MustCompile(b.String())
	// The longest match, not the first found: an optional rest must not
	// stop a match at an escape that a later alternative would continue.
	r.re.Longest()
	return r
}

// maxNestedRunes bounds the keys whose prefixes the regular expression
// matches: each character past MinRedactedRun nests one optional group, and
// Go's regexp refuses nesting deeper than 1,000. A longer key is matched in
// escapes only whole (the scan still finds its runs).
const maxNestedRunes = 512

// Redact returns s with every occurrence of the key, in any encoding,
// replaced by Redacted.
func (r *Redactor) Redact(s string) string {
	if r == nil || r.key == "" {
		return s
	}
	s = strings.ReplaceAll(s, r.key, Redacted) // the common case, and cheap
	// The escapes before the scan, which could take a run of plain
	// characters out of an escaped key and leave the escapes around it.
	s = replaceSpans(s, r.escaped(s, false))
	return replaceSpans(s, r.scan.spans(s))
}

// escaped returns the spans of s where re matches, leftmost-longest and not
// overlapping, as ReplaceAll would find them; with first, only the first.
//
// re is tried, anchored and within r.window bytes, only where a match can
// start. A run of backslashes (\ or URL-encoded, %5C, %255C, …) is tried
// at its start, where a match from any later backslash of the run is one
// too, since an escape takes any number of backslashes; and at its last
// backslash, for a run longer than the window. Without that, a try at each
// backslash of a long run, each running to the end of the run, would cost
// the square of its length.
func (r *Redactor) escaped(s string, first bool) [][2]int {
	if r.re == nil || !strings.ContainsAny(s, r.escapes) {
		return nil
	}
	var out [][2]int
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], r.starts)
		if j < 0 {
			break
		}
		i += j
		if loc := r.re.FindStringIndex(s[i:min(len(s), i+r.window)]); loc != nil && loc[1] > 0 {
			out = append(out, [2]int{i, i + loc[1]})
			if first {
				break
			}
			i += loc[1]
			continue
		}
		if n, last := backslashRun(s[i:]); n > 0 {
			// Once more at the run's last backslash, should the run be
			// longer than the window; then past the run.
			if last > 0 {
				if loc := r.re.FindStringIndex(s[i+last : min(len(s), i+last+r.window)]); loc != nil && loc[1] > 0 {
					out = append(out, [2]int{i + last, i + last + loc[1]})
					if first {
						break
					}
					i += last + loc[1]
					continue
				}
			}
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return out
}

// backslashRun returns the length n of the run of backslashes that s
// starts with, each a \ or a URL-encoded one (%5C, %255C, … in either
// case), and where its last one starts; 0, 0 when s starts with none.
func backslashRun(s string) (n, last int) {
	for n < len(s) {
		if s[n] == '\\' {
			last = n
			n++
			continue
		}
		if s[n] != '%' {
			break
		}
		k := n + 1
		for strings.HasPrefix(s[k:], "25") {
			k += 2
		}
		if k+2 > len(s) || s[k] != '5' || s[k+1] != 'c' && s[k+1] != 'C' {
			break
		}
		last, n = n, k+2
	}
	return n, last
}

// Contains reports whether s holds the key in any encoding.
func (r *Redactor) Contains(s string) bool {
	if r == nil || r.key == "" {
		return false
	}
	return strings.Contains(s, r.key) || len(r.scan.spans(s)) > 0 || len(r.escaped(s, true)) > 0
}

// RedactErr returns err, or a plain error of err's redacted text when the
// text of err, or of any error its chain wraps, holds the key, so that not
// even the unwrapped chain leaks it.
func (r *Redactor) RedactErr(err error) error {
	if err == nil || r == nil || r.key == "" {
		return err
	}
	leaks := false
	for e := err; e != nil && !leaks; e = errors.Unwrap(e) {
		leaks = r.Contains(e.Error()) || r.Contains(fmt.Sprintf("%#v", e))
	}
	if !leaks {
		return err
	}
	return errors.New(r.Redact(err.Error()))
}

// runeForms returns the regular expressions of the encodings of c.
func runeForms(c rune) []string {
	var buf [utf8.UTFMax]byte
	raw := buf[:utf8.EncodeRune(buf[:], c)]
	var forms []string

	// JSON's \uXXXX (RFC 8259 §7), a surrogate pair beyond the BMP.
	if c <= 0xFFFF {
		forms = append(forms, backslashes+"u"+hexDigits(uint32(c), 4))
	} else {
		d := c - 0x10000
		forms = append(forms, backslashes+"u"+hexDigits(uint32(0xD800+(d>>10)), 4)+backslashes+"u"+hexDigits(uint32(0xDC00+(d&0x3FF)), 4))
	}

	// Byte escapes: \xXX (Go's %q, Python's repr) and %XX (RFC 3986 §2.1).
	var x, pct strings.Builder
	for _, b := range raw {
		x.WriteString(backslashes + "x" + hexDigits(uint32(b), 2))
		pct.WriteString(percent(b))
	}
	forms = append(forms, x.String(), pct.String())

	// JSON's short escapes, after \u and \x: a backslash of the key must not
	// take the first character of an escape that encodes the key's next one.
	switch c {
	case '/', '"':
		forms = append(forms, backslashes+literal(byte(c)))
	case '\\':
		forms = append(forms, backslashes) // \\, \\\\, %5C, %5C%5C, …
	case '\b', '\f', '\n', '\r', '\t':
		forms = append(forms, backslashes+string("bfnrt"[strings.IndexRune("\b\f\n\r\t", c)]))
	case ' ':
		forms = append(forms, `\+`, percent('+')) // application/x-www-form-urlencoded, then encoded again
	}

	// HTML character references, their punctuation possibly URL-encoded.
	amp, hash, semi := literal('&'), literal('#'), literal(';')
	forms = append(forms, fmt.Sprintf("%s%s0*%d%s", amp, hash, c, semi), amp+hash+"[xX]0*"+hexDigits(uint32(c), 0)+semi)
	if name, ok := map[rune]string{'&': "amp", '<': "lt", '>': "gt", '"': "quot", '\'': "apos"}[c]; ok {
		forms = append(forms, amp+name+semi)
	}

	// The character itself comes last: alternatives are tried in order, and
	// an escape must not be taken apart when its first character happens to
	// be the key's next one (a key holding `\x` meets `\x5c\x78`).
	return append(forms, anyCase(c))
}

// anyCase matches c itself in either case: a class of the two for an ASCII
// letter (cheaper than the (?i) flag, which folds every literal of every
// escape), a case-insensitive group for another letter with a case.
func anyCase(c rune) string {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return "[" + string(unicode.ToLower(c)) + string(unicode.ToUpper(c)) + "]"
	case unicode.SimpleFold(c) != c:
		return "(?i:" + regexp.QuoteMeta(string(c)) + ")"
	}
	return regexp.QuoteMeta(string(c))
}

// backslashes matches the backslash that starts an escape: one or more
// (escaped once, twice, …), each possibly URL-encoded (%5C, %255C, …).
const backslashes = `(?:\\|%(?:25)*5[cC])+`

// percent matches byte b URL-encoded once or more (%XX, %25XX, …).
func percent(b byte) string { return "%(?:25)*" + hexDigits(uint32(b), 2) }

// literal matches the ASCII punctuation b of an escape, or b URL-encoded.
func literal(b byte) string {
	return "(?:" + regexp.QuoteMeta(string(rune(b))) + "|" + percent(b) + ")"
}

// hexDigits returns the regular expression of v in hexadecimal, in width
// digits (0 = as few as needed), each letter in either case.
func hexDigits(v uint32, width int) string {
	s := fmt.Sprintf("%0*x", width, v)
	var b strings.Builder
	for _, d := range s {
		if d >= 'a' && d <= 'f' {
			fmt.Fprintf(&b, "[%c%c]", d, d-'a'+'A')
		} else {
			b.WriteRune(d)
		}
	}
	return b.String()
}
