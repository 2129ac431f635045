package magic

import (
	"encoding/base64"
	"strings"
)

// DataURL returns img as an RFC 2397 data URL with standard, padded base64:
// "data:image/png;base64,iVBORw0KGgo...". The string is grown once to its exact
// size, since images may be tens of megabytes.
func DataURL(f Format, img []byte) string {
	prefix := "data:" + f.MIME() + ";base64,"
	var b strings.Builder
	b.Grow(len(prefix) + base64.StdEncoding.EncodedLen(len(img)))
	b.WriteString(prefix)
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	enc.Write(img) // writes to a strings.Builder never fail
	enc.Close()
	return b.String()
}
