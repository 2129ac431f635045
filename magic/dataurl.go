package magic

import (
	"encoding/base64"
	"slices"
	"strings"
)

// DataURL returns img as an RFC 2397 data URL with standard, padded base64:
// "data:image/png;base64,iVBORw0KGgo...". The string is grown once to its exact
// size, since images may be tens of megabytes.
func DataURL(f Format, img []byte) string {
	var b strings.Builder
	b.Grow(DataURLLen(f, img))
	b.WriteString("data:" + f.MIME() + ";base64,")
	var buf [4096]byte // 3,072 bytes of image at a time
	for len(img) > 0 {
		n := min(len(img), 3072)
		m := base64.StdEncoding.EncodedLen(n)
		encodeBase64(buf[:m], img[:n])
		b.Write(buf[:m])
		img = img[n:]
	}
	return b.String()
}

// AppendDataURL appends img's data URL to dst, the base64 written straight
// into dst's memory: a request body is built in one pass, with no data URL
// string on the way.
func AppendDataURL(dst []byte, f Format, img []byte) []byte {
	dst = append(dst, "data:"...)
	dst = append(dst, f.MIME()...)
	dst = append(dst, ";base64,"...)
	n := len(dst)
	dst = slices.Grow(dst, base64.StdEncoding.EncodedLen(len(img)))[:n+base64.StdEncoding.EncodedLen(len(img))]
	encodeBase64(dst[n:], img)
	return dst
}

// DataURLLen is the length of img's data URL in format f.
func DataURLLen(f Format, img []byte) int {
	return len("data:") + len(f.MIME()) + len(";base64,") + base64.StdEncoding.EncodedLen(len(img))
}
