package estimate

import (
	"image"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/normalize"
)

// Scan is what was read of a source table's images.
type Scan struct {
	Rows      int64 // rows of the table (exact, or pg_class's estimate when sampled)
	Sampled   bool
	Read      int64         // rows read
	WithImage int64         // of those, with a non-NULL image
	Sizes     []image.Point // of the images whose header could be read
	Bytes     []int64       // their lengths, as stored
	Unknown   int64         // images that are not PNG/JPEG/GIF/WebP, or whose header could not be read: no call
}

// Add counts one row read: head is the start of its image (nil: NULL),
// length the image's length as stored. An image whose format is unknown or
// whose header gives no size makes no call.
func (s *Scan) Add(head []byte, length int64) {
	s.Read++
	if head == nil {
		return
	}
	s.WithImage++
	format, err := magic.Detect(head)
	if err != nil {
		s.Unknown++
		return
	}
	w, h, ok := normalize.Dimensions(head, format)
	if !ok || w <= 0 || h <= 0 {
		s.Unknown++
		return
	}
	s.Sizes = append(s.Sizes, image.Pt(w, h))
	s.Bytes = append(s.Bytes, length)
}
