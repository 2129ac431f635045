package provider

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"slices"
)

// MinRedactedRun is the shortest run of a key that a Redactor redacts on its
// own: any 8 consecutive characters of the key (a prefix a server echoes, a
// suffix, either piece of a key split across a line) are redacted wherever
// they appear, and so is a run of its hexadecimal or base64 encoding that
// stands for at least 8 of its bytes. A key shorter than this is redacted
// only whole.
const MinRedactedRun = 8

// gramLen is the length of the windows the scanner looks up: 8 bytes, one
// uint64, so a lookup is one map access of an integer.
const gramLen = 8

// view is how the scanner reads the text for a family of targets.
type view uint8

const (
	foldView   view = iota // ASCII letters in lower case: the key's characters, its hex
	base64View             // '-' read as '+', '_' as '/': both base64 alphabets
)

// target is one encoding of the key, written in its view's alphabet, and the
// shortest run of it that is redacted.
type target struct {
	text string
	min  int
	view view
}

// hit is a place in a target where a gram occurs.
type hit struct {
	target int
	off    int
}

// scanner finds runs of a key's encodings in text in one pass: every window
// of gramLen bytes is looked up in a map of the targets' windows, and a hit
// is extended as far as the target goes on.
type scanner struct {
	targets []target
	grams   [2]map[uint64][]hit // by view
}

// newScanner returns the scanner of key, or nil when key is shorter than
// MinRedactedRun bytes.
func newScanner(key string) *scanner {
	if len(key) < MinRedactedRun {
		return nil
	}
	s := &scanner{}
	s.targets = append(s.targets,
		target{text: foldASCII(key), min: MinRedactedRun, view: foldView},
		target{text: hex.EncodeToString([]byte(key)), min: 2 * MinRedactedRun, view: foldView})
	// Base64 of the key at each of the three offsets it can start at in a
	// longer encoded text: only the characters made of key bits alone, the
	// same whatever surrounds the key, and whether padded or not.
	const b64Min = (MinRedactedRun*8 + 5) / 6
	for o := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, o), key...))
		start, end := (8*o+5)/6, 8*(o+len(key))/6
		core := enc[start:end]
		s.targets = append(s.targets, target{text: core, min: min(b64Min, len(core)), view: base64View})
	}
	s.grams[foldView], s.grams[base64View] = map[uint64][]hit{}, map[uint64][]hit{}
	for i, t := range s.targets {
		for off := 0; off+gramLen <= len(t.text); off++ {
			g := binary.LittleEndian.Uint64([]byte(t.text[off : off+gramLen]))
			s.grams[t.view][g] = append(s.grams[t.view][g], hit{target: i, off: off})
		}
	}
	return s
}

// spans returns the byte ranges [start, end) of text holding a run of an
// encoding of the key, sorted and merged.
func (s *scanner) spans(text string) [][2]int {
	if s == nil || len(text) < gramLen {
		return nil
	}
	var views [2][]byte
	views[foldView] = []byte(foldASCII(text))
	b := []byte(text)
	for i, c := range b {
		switch c {
		case '-':
			b[i] = '+'
		case '_':
			b[i] = '/'
		}
	}
	views[base64View] = b

	var out [][2]int
	for v, grams := range s.grams {
		data := views[v]
		for j := 0; j+gramLen <= len(data); j++ {
			hits, ok := grams[binary.LittleEndian.Uint64(data[j:])]
			if !ok {
				continue
			}
			end := 0
			for _, h := range hits {
				t := s.targets[h.target]
				n := gramLen
				for j+n < len(data) && h.off+n < len(t.text) && data[j+n] == t.text[h.off+n] {
					n++
				}
				if n >= t.min {
					end = max(end, j+n)
				}
			}
			if end > 0 {
				out = append(out, [2]int{j, end})
			}
		}
	}
	return merge(out)
}

// merge sorts spans and joins those that overlap or touch.
func merge(spans [][2]int) [][2]int {
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 && sp[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], sp[1])
			continue
		}
		out = append(out, sp)
	}
	return out
}

// replaceSpans returns text with each span replaced by Redacted.
func replaceSpans(text string, spans [][2]int) string {
	if len(spans) == 0 {
		return text
	}
	b := make([]byte, 0, len(text))
	last := 0
	for _, sp := range spans {
		b = append(b, text[last:sp[0]]...)
		b = append(b, Redacted...)
		last = sp[1]
	}
	return string(append(b, text[last:]...))
}

// foldASCII returns s with its ASCII letters in lower case, byte for byte
// (unlike strings.ToLower, which may change the length of other text).
func foldASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
