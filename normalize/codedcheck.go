package normalize

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pgimageai/pgimageai/magic"
)

// errUnverifiable is wrapped by the error of a HEIF or AVIF file whose coded
// size cannot be read: it is not handed to a decoder.
var errUnverifiable = errors.New("the coded size cannot be checked")

// checkCoded checks a HEIF or AVIF file against what its decoder will
// allocate: the primary image (a coded item, or a grid of them), and the
// auxiliary images (alpha) decoded with it, each coded no larger than its
// ispe box says (an HEVC image within hevcSlack), a grid's tiles covering
// its output and no more. It returns the pixels the decoder will decode at their checked
// coded sizes: the primary image's (a grid's tiles together) and its
// auxiliary images'. A coded image larger than its ispe is ErrTooLarge; a
// file whose sizes cannot be read errUnverifiable.
func checkCoded(f magic.Format, file []byte) (int64, error) {
	px, _, err := checkContainer(f, file)
	return px, err
}

// checkContainer is checkCoded that also returns the container it read, so
// that a header is read from it without parsing the file again.
func checkContainer(f magic.Format, file []byte) (int64, *container, error) {
	c, err := readContainer(file)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errUnverifiable, err)
	}
	px, err := c.check(f, file)
	return px, c, err
}

func (c *container) check(f magic.Format, file []byte) (int64, error) {
	fail := func(err error) (int64, error) {
		if errors.Is(err, ErrTooLarge) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %w", errUnverifiable, err)
	}
	if f == magic.AVIF && c.moov && majorBrand(file) != "avif" {
		// libavif decodes the track of a file with a moov box unless its
		// major brand is avif: its frames are not items, their sizes are not
		// checked here, so it is not decoded.
		return fail(fmt.Errorf("an AVIF image sequence (a moov box, major brand %q)", majorBrand(file)))
	}
	primary := c.items[c.primary]
	px, err := c.checkItem(f, primary, 0)
	if err != nil {
		return fail(err)
	}
	for _, it := range c.items {
		if it.auxlOf == 0 || it.id == primary.id {
			continue
		}
		// The auxiliary images a decoder decodes with the primary (alpha,
		// gain maps) are coded images; another kind it does not decode.
		if coded := it.typ == "hvc1" || it.typ == "av01" || it.typ == "grid"; coded && (it.auxlOf == primary.id || contains(primary.dimg, it.auxlOf)) {
			n, err := c.checkItem(f, it, 0)
			if err != nil {
				return fail(fmt.Errorf("auxiliary image %d: %w", it.id, err))
			}
			px += n
		}
	}
	return px, nil
}

// maxISPESide bounds the sides of an ispe box read at all (libheif's own
// default limit is 32768 × 32768 pixels): 2²⁰, far past any byte bound, so
// that no product of sizes overflows.
const maxISPESide = 1 << 20

func contains(ids []uint32, id uint32) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

func majorBrand(file []byte) string {
	if len(file) < 12 || string(file[4:8]) != "ftyp" {
		return ""
	}
	return string(file[8:12])
}

// checkItem checks one image item: a coded one against its ispe, a grid's
// tiles against it and each against its own. It returns the pixels decoded
// for it: the largest coded size of a coded item, the sum of a grid's
// tiles'.
func (c *container) checkItem(f magic.Format, it *item, depth int) (int64, error) {
	if depth > 2 {
		return 0, errors.New("derived images nested too deep")
	}
	iw, ih, ok := it.ispe()
	if !ok {
		return 0, fmt.Errorf("item %d (%s) has no ispe property", it.id, it.typ)
	}
	if iw == 0 || ih == 0 {
		return 0, fmt.Errorf("item %d: ispe of %dx%d pixels", it.id, iw, ih)
	}
	if iw > maxISPESide || ih > maxISPESide {
		return 0, fmt.Errorf("item %d: ispe of %dx%d pixels, a side over %d: %w", it.id, iw, ih, maxISPESide, ErrTooLarge)
	}
	switch it.typ {
	case "hvc1", "av01":
		if (it.typ == "hvc1") != (f == magic.HEIF) {
			return 0, fmt.Errorf("item %d: a %s item in a %s file", it.id, it.typ, f)
		}
		if !it.located {
			return 0, fmt.Errorf("item %d has no location in the file or its idat box", it.id)
		}
		data, err := c.data(it)
		if err != nil {
			return 0, err
		}
		var sizes [][2]uint64
		if it.typ == "hvc1" {
			p, ok := it.prop("hvcC")
			if !ok {
				return 0, fmt.Errorf("item %d has no hvcC property", it.id)
			}
			sizes, err = hevcCodedSizes(p.data, data)
		} else {
			p, ok := it.prop("av1C")
			if !ok {
				return 0, fmt.Errorf("item %d has no av1C property", it.id)
			}
			sizes, err = av1CodedSizes(p.data, data)
		}
		if err != nil {
			return 0, fmt.Errorf("item %d: %w", it.id, err)
		}
		if len(sizes) == 0 {
			return 0, fmt.Errorf("item %d: no sequence header", it.id)
		}
		slack := uint64(0)
		if it.typ == "hvc1" {
			slack = hevcSlack
		}
		var most int64
		for _, s := range sizes {
			if s[0] == 0 || s[1] == 0 {
				return 0, fmt.Errorf("item %d: coded as %dx%d", it.id, s[0], s[1])
			}
			if s[0] > uint64(iw)+slack || s[1] > uint64(ih)+slack {
				return 0, fmt.Errorf("%s item %d is coded as %dx%d pixels, its ispe box says %dx%d: %w",
					f, it.id, s[0], s[1], iw, ih, ErrTooLarge)
			}
			most = max(most, int64(s[0])*int64(s[1]))
		}
		return most, nil
	case "grid":
		if !it.located {
			return 0, fmt.Errorf("grid %d has no location in the file or its idat box", it.id)
		}
		data, err := c.data(it)
		if err != nil {
			return 0, err
		}
		// ImageGrid (ISO/IEC 23008-12 §6.6.2.3.2).
		if len(data) < 8 {
			return 0, fmt.Errorf("grid %d: its data is too short", it.id)
		}
		rows, cols := uint64(data[2])+1, uint64(data[3])+1
		var ow, oh uint64
		if data[1]&1 == 0 {
			ow, oh = uint64(binary.BigEndian.Uint16(data[4:])), uint64(binary.BigEndian.Uint16(data[6:]))
		} else if len(data) >= 12 {
			ow, oh = uint64(binary.BigEndian.Uint32(data[4:])), uint64(binary.BigEndian.Uint32(data[8:]))
		} else {
			return 0, fmt.Errorf("grid %d: its data is too short", it.id)
		}
		if ow > uint64(iw) || oh > uint64(ih) {
			return 0, fmt.Errorf("grid %d has an output of %dx%d pixels, its ispe box says %dx%d: %w", it.id, ow, oh, iw, ih, ErrTooLarge)
		}
		if uint64(len(it.dimg)) != rows*cols {
			return 0, fmt.Errorf("grid %d of %dx%d tiles has %d", it.id, cols, rows, len(it.dimg))
		}
		var px int64
		for _, id := range it.dimg {
			tile, ok := c.items[id]
			if !ok {
				return 0, fmt.Errorf("grid %d: tile %d is not an item", it.id, id)
			}
			tw, th, ok := tile.ispe()
			if !ok || tw == 0 || th == 0 {
				return 0, fmt.Errorf("grid %d: tile %d has no ispe", it.id, id)
			}
			// The tiles cover the output and pass it by less than a tile.
			if (cols-1)*uint64(tw) >= ow || (rows-1)*uint64(th) >= oh || cols*uint64(tw) < ow || rows*uint64(th) < oh {
				return 0, fmt.Errorf("grid %d of %dx%d tiles of %dx%d pixels for an output of %dx%d: %w", it.id, cols, rows, tw, th, ow, oh, ErrTooLarge)
			}
			n, err := c.checkItem(f, tile, depth+1)
			if err != nil {
				return 0, err
			}
			px += n
		}
		return px, nil
	}
	return 0, fmt.Errorf("item %d is of type %q, not decoded", it.id, it.typ)
}
