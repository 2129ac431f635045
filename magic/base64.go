package magic

import (
	"encoding/base64"
	"encoding/binary"
)

// encodeBase64 writes src's standard, padded base64 into dst, which holds
// base64.StdEncoding.EncodedLen(len(src)) bytes: the same bytes as
// base64.StdEncoding.Encode, about twice as fast. Every request of an image
// carries its base64 (an 8 KB image is 11 KB of it), and encoding/base64's
// four table lookups per three bytes were 7.7–9.6% of the bridge's CPU.
//
// Six bytes at a time: a big-endian 8-byte load gives four 12-bit groups,
// each looked up as two characters (base64Pairs), stored as one 8-byte
// little-endian word. The last bytes (fewer than 8 left to load) and the
// padding are encoding/base64's.
func encodeBase64(dst, src []byte) {
	i, j := 0, 0
	for ; len(src)-i >= 8; i, j = i+6, j+8 {
		v := binary.BigEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(dst[j:], uint64(base64Pairs[v>>52])|
			uint64(base64Pairs[v>>40&0xfff])<<16|
			uint64(base64Pairs[v>>28&0xfff])<<32|
			uint64(base64Pairs[v>>16&0xfff])<<48)
	}
	base64.StdEncoding.Encode(dst[j:], src[i:])
}

// base64Pairs holds, for each 12-bit value, its two base64 characters: the
// first in the low byte, so that a little-endian store writes them in order.
var base64Pairs = func() (t [4096]uint16) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for v := range t {
		t[v] = uint16(alphabet[v>>6]) | uint16(alphabet[v&63])<<8
	}
	return t
}()
