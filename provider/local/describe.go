package local

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// colour is one name of the palette the description uses.
type colour uint8

const (
	black colour = iota
	white
	grey
	red
	orange
	yellow
	green
	cyan
	blue
	purple
	pink
	brown
	numColours
)

var colourNames = [numColours]string{
	"black", "white", "grey", "red", "orange", "yellow",
	"green", "cyan", "blue", "purple", "pink", "brown",
}

func (c colour) String() string { return colourNames[c] }

// Thresholds of the description.
const (
	minShare       = 0.10  // a second or third colour is named from this share of the visible pixels
	maxColours     = 3     // colours named at most
	darkBelow      = 35.0  // mean CIE L* under which an image is dark
	brightAbove    = 65.0  // mean CIE L* over which an image is bright
	notableClear   = 0.05  // transparency mentioned from this mean share
	invisibleBelow = 0.005 // mean opacity under which the image counts as fully transparent
)

// classify names the colour of one straight (not premultiplied) sRGB pixel
// by its HSV hue, saturation and value: dark pixels are black, unsaturated
// ones black, grey or white, and the rest take their hue's name, with light
// reds and purples called pink and dark reds, oranges and yellows brown.
func classify(r, g, b uint8) colour {
	mx := max(r, g, b)
	mn := min(r, g, b)
	v := float64(mx) / 255
	c := float64(mx-mn) / 255
	if v < 0.16 {
		return black
	}
	s := c / v
	if s < 0.18 || c < 0.08 {
		switch {
		case v >= 0.86:
			return white
		case v < 0.2:
			return black
		}
		return grey
	}
	var h float64 // hue in degrees, [0, 360)
	rf, gf, bf := float64(r)/255, float64(g)/255, float64(b)/255
	switch mx {
	case r:
		h = math.Mod(60*(gf-bf)/c+360, 360)
	case g:
		h = 60*(bf-rf)/c + 120
	default:
		h = 60*(rf-gf)/c + 240
	}
	l := (v + float64(mn)/255) / 2
	switch {
	case h < 15 || h >= 340:
		if l >= 0.7 {
			return pink
		}
		if v < 0.5 {
			return brown
		}
		return red
	case h < 45:
		if v < 0.7 || s < 0.45 {
			return brown
		}
		return orange
	case h < 70:
		if v < 0.55 {
			return brown
		}
		return yellow
	case h < 160:
		return green
	case h < 195:
		return cyan
	case h < 260:
		return blue
	case h < 320:
		if l >= 0.7 {
			return pink // violet, orchid
		}
		return purple // magenta included
	}
	return pink
}

// srgbLinear maps an 8-bit sRGB value to linear light, for CIE L*.
var srgbLinear = func() (t [256]float64) {
	for i := range t {
		c := float64(i) / 255
		if c <= 0.04045 {
			t[i] = c / 12.92
		} else {
			t[i] = math.Pow((c+0.055)/1.055, 2.4)
		}
	}
	return t
}()

// lightness returns the CIE L* (0..100) of a straight sRGB pixel.
func lightness(r, g, b uint8) float64 {
	y := 0.2126*srgbLinear[r] + 0.7152*srgbLinear[g] + 0.0722*srgbLinear[b]
	if y <= 216.0/24389 {
		return y * 24389 / 27
	}
	return 116*math.Cbrt(y) - 16
}

// summary is what the description says about a picture's pixels.
type summary struct {
	shares    [numColours]float64 // of the visible (opacity-weighted) pixels
	lightness float64             // mean CIE L* of the visible pixels
	clear     float64             // mean transparency, 0..1
}

// summarise weighs every pixel of the small copy by its opacity.
func summarise(pic picture) summary {
	var s summary
	m := pic.small
	w, h := m.Rect.Dx(), m.Rect.Dy()
	var opacity, light float64
	for y := range h {
		row := m.Pix[y*m.Stride : y*m.Stride+4*w]
		for x := 0; x < len(row); x += 4 {
			a := row[x+3]
			if a == 0 {
				continue
			}
			r, g, b := unpremultiply(row[x], a), unpremultiply(row[x+1], a), unpremultiply(row[x+2], a)
			wt := float64(a) / 255
			s.shares[classify(r, g, b)] += wt
			light += wt * lightness(r, g, b)
			opacity += wt
		}
	}
	n := float64(w * h)
	s.clear = 1 - opacity/n
	if opacity > 0 {
		for i := range s.shares {
			s.shares[i] /= opacity
		}
		s.lightness = light / opacity
	}
	return s
}

// unpremultiply returns the straight value of premultiplied channel c at
// alpha a, clamped since a scaler may overshoot.
func unpremultiply(c, a uint8) uint8 {
	if a == 255 {
		return c
	}
	if c >= a {
		return 255
	}
	return uint8((uint32(c)*255 + uint32(a)/2) / uint32(a))
}

// describe writes the description of pic, e.g. "PNG image, 640x480 pixels,
// mostly blue (62%) and white (30%), medium brightness."
func describe(pic picture) string {
	s := summarise(pic)
	var b strings.Builder
	fmt.Fprintf(&b, "%s image, %dx%d pixels, ", pic.format, pic.width, pic.height)
	if 1-s.clear < invisibleBelow {
		b.WriteString("fully transparent.")
		return b.String()
	}
	b.WriteString(colours(s.shares))
	switch {
	case s.lightness < darkBelow:
		b.WriteString(", dark")
	case s.lightness > brightAbove:
		b.WriteString(", bright")
	default:
		b.WriteString(", medium brightness")
	}
	if s.clear >= notableClear {
		fmt.Fprintf(&b, ", %d%% transparent", percent(s.clear))
	}
	b.WriteString(".")
	return b.String()
}

// colours names the most common colour and up to two more that cover at
// least minShare each: "mostly blue (62%) and white (30%)".
func colours(shares [numColours]float64) string {
	order := make([]colour, numColours)
	for i := range order {
		order[i] = colour(i)
	}
	sort.SliceStable(order, func(i, j int) bool { return shares[order[i]] > shares[order[j]] })
	var parts []string
	for i, c := range order[:maxColours] {
		if i > 0 && shares[c] < minShare {
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d%%)", c, percent(shares[c])))
	}
	if len(parts) == 1 && percent(shares[order[0]]) == 100 {
		return "entirely " + parts[0]
	}
	switch len(parts) {
	case 1:
		return "mostly " + parts[0]
	case 2:
		return "mostly " + parts[0] + " and " + parts[1]
	}
	return "mostly " + parts[0] + ", " + parts[1] + " and " + parts[2]
}

func percent(f float64) int { return int(math.Round(f * 100)) }
