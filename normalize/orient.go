package normalize

import "image"

// swapsSides reports whether EXIF orientation o turns the image a quarter:
// 5–8 show the stored rows as columns.
func swapsSides(o int) bool { return o >= 5 && o <= 8 }

// orient returns m shown as EXIF orientation o says (CIPA DC-008 §4.6.4,
// tag 0x0112): 2 mirrored left to right, 3 turned half a turn, 4 mirrored
// top to bottom, 5 transposed, 6 turned a quarter clockwise, 7 transversed,
// 8 turned a quarter anticlockwise. 1 (or anything else) returns m.
func orient(m *image.RGBA, o int) *image.RGBA {
	if o < 2 || o > 8 {
		return m
	}
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if swapsSides(o) {
		dw, dh = h, w
	}
	out := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range dh {
		for x := range dw {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			si := m.PixOffset(b.Min.X+sx, b.Min.Y+sy)
			di := out.PixOffset(x, y)
			copy(out.Pix[di:di+4], m.Pix[si:si+4])
		}
	}
	return out
}
