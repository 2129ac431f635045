package backfill

import (
	"bytes"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
)

// batchPNG is a PNG signature and three bytes: an image by its magic.
var batchPNG = []byte{0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3}

func TestCustomIDRoundTrip(t *testing.T) {
	k := work.KeyOf(functions.Complete, "m@1", "", "p", batchPNG)
	for _, key := range []string{`{"id": 1}`, `{"path": "a/b c", "n": 2}`} {
		input, got, ok := parseCustomID(customID(k, []byte(key)))
		if !ok || !bytes.Equal(input, k[:]) || string(got) != key {
			t.Errorf("%s: parsed %x %q %v", key, input, got, ok)
		}
	}
	for _, bad := range []string{"", "nohex", "zz/{}", "abcd/{}", string(make([]byte, 64)) + "/{}", customID(k, []byte("{not json"))} {
		if _, _, ok := parseCustomID(bad); ok {
			t.Errorf("parseCustomID(%q) accepted", bad)
		}
	}
}
