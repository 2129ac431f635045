package normalize

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file reads the HEIF container (ISO/IEC 23008-12, on the ISO base
// media file format of ISO/IEC 14496-12) of a HEIC or AVIF file as far as
// the bounds need: its items, their types, their properties (ispe, hvcC,
// av1C), their data (iloc) and references (iref), so that the size each
// coded image really has can be checked against what its ispe box says
// before any decoder allocates for it.

// box is one ISOBMFF box: its type and payload.
type box struct {
	typ  string
	data []byte // the payload, after the size and type (and a FullBox's version and flags are in it)
	off  int    // the payload's offset in the file
}

// boxes splits b, found at offset base of the file, into boxes (ISO/IEC
// 14496-12 §4.2: a 32-bit size, or 1 and a 64-bit size, or 0 to the end).
func boxes(b []byte, base int) ([]box, error) {
	var out []box
	for p := 0; p < len(b); {
		if len(b)-p < 8 {
			return nil, fmt.Errorf("box header at byte %d runs past the end", base+p)
		}
		size := uint64(binary.BigEndian.Uint32(b[p:]))
		typ := string(b[p+4 : p+8])
		hdr := 8
		switch size {
		case 0:
			size = uint64(len(b) - p)
		case 1:
			if len(b)-p < 16 {
				return nil, fmt.Errorf("box %q at byte %d: large size runs past the end", typ, base+p)
			}
			size, hdr = binary.BigEndian.Uint64(b[p+8:]), 16
		}
		if size < uint64(hdr) || size > uint64(len(b)-p) {
			return nil, fmt.Errorf("box %q at byte %d of %d bytes runs past the end", typ, base+p, size)
		}
		out = append(out, box{typ: typ, data: b[p+hdr : p+int(size)], off: base + p + hdr})
		p += int(size)
	}
	return out, nil
}

// topBoxes is boxes for the top level of a file, stopping at a box that
// runs past the end.
func topBoxes(file []byte) ([]box, error) {
	var out []box
	for p := 0; p < len(file); {
		bs, err := boxes(file[p:min(len(file), p+boxLen(file[p:]))], p)
		if err != nil || len(bs) == 0 {
			if len(out) == 0 {
				return nil, err
			}
			return out, nil
		}
		out = append(out, bs[0])
		p += boxLen(file[p:])
	}
	return out, nil
}

// boxLen is the length of the box at the start of b, header included, as
// its header says (0 when it cannot be read).
func boxLen(b []byte) int {
	if len(b) < 8 {
		return len(b)
	}
	size := uint64(binary.BigEndian.Uint32(b))
	switch size {
	case 0:
		return len(b)
	case 1:
		if len(b) < 16 {
			return len(b)
		}
		size = binary.BigEndian.Uint64(b[8:])
	}
	if size < 8 || size > uint64(len(b)) {
		return len(b) + 1 // past the end: boxes reports it
	}
	return int(size)
}

func find(bs []box, typ string) (box, bool) {
	for _, b := range bs {
		if b.typ == typ {
			return b, true
		}
	}
	return box{}, false
}

// reader reads big-endian fields of a box's payload; a read past the end
// sets err and returns 0.
type reader struct {
	b   []byte
	p   int
	err error
}

func (r *reader) n(n int) uint64 {
	if r.err != nil {
		return 0
	}
	if n < 0 || len(r.b)-r.p < n {
		r.err = errors.New("box ends early")
		return 0
	}
	var v uint64
	for _, c := range r.b[r.p : r.p+n] {
		v = v<<8 | uint64(c)
	}
	r.p += n
	return v
}

// item is one item of the file's meta box.
type item struct {
	id       uint32
	typ      string // hvc1, av01, grid, Exif, mime, …
	props    []box  // its associated properties, in ipco order
	extents  [][2]uint64
	fromIdat bool
	located  bool     // its extents are in the file or idat (construction methods 0 and 1)
	dimg     []uint32 // the items it is derived from (a grid's tiles)
	auxlOf   uint32   // the item it is an auxiliary image of (alpha, depth)
}

func (it *item) prop(typ string) (box, bool) { return find(it.props, typ) }

// container is what readContainer found.
type container struct {
	file    []byte
	primary uint32
	items   map[uint32]*item
	idat    box
	moov    bool // an image sequence (tracks), read by the decoders before the items
}

// readContainer reads the top-level boxes and the meta box of a HEIF file,
// or of its start: a top-level box cut short (the mdat of a file's first
// bytes) is left out; the extents of items are checked when they are read.
func readContainer(file []byte) (*container, error) {
	top, err := topBoxes(file)
	if err != nil {
		return nil, err
	}
	c := &container{file: file, items: map[uint32]*item{}}
	_, c.moov = find(top, "moov")
	meta, ok := find(top, "meta")
	if !ok {
		return nil, errors.New("no meta box")
	}
	if len(meta.data) < 4 {
		return nil, errors.New("meta box too short")
	}
	children, err := boxes(meta.data[4:], meta.off+4)
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	c.idat, _ = find(children, "idat")
	pitm, ok := find(children, "pitm")
	if !ok {
		return nil, errors.New("no pitm box (primary item)")
	}
	r := &reader{b: pitm.data}
	if v := r.n(4) >> 24; v == 0 {
		c.primary = uint32(r.n(2))
	} else {
		c.primary = uint32(r.n(4))
	}
	if r.err != nil {
		return nil, fmt.Errorf("pitm: %w", r.err)
	}
	for _, step := range []struct {
		typ  string
		read func(box) error
	}{{"iinf", c.readIinf}, {"iloc", c.readIloc}, {"iprp", c.readIprp}, {"iref", c.readIref}} {
		b, ok := find(children, step.typ)
		if !ok {
			if step.typ == "iref" {
				continue
			}
			return nil, fmt.Errorf("no %s box", step.typ)
		}
		if err := step.read(b); err != nil {
			return nil, fmt.Errorf("%s: %w", step.typ, err)
		}
	}
	if _, ok := c.items[c.primary]; !ok {
		return nil, fmt.Errorf("the primary item %d is not in iinf", c.primary)
	}
	return c, nil
}

func (c *container) item(id uint32) *item {
	it, ok := c.items[id]
	if !ok {
		it = &item{id: id}
		c.items[id] = it
	}
	return it
}

// readIinf: ItemInfoBox (ISO/IEC 14496-12 §8.11.6); only infe version 2
// and 3 carry an item type, which HEIF requires.
func (c *container) readIinf(b box) error {
	r := &reader{b: b.data}
	n := 4
	if r.n(4)>>24 == 0 {
		n = 2
	}
	r.n(n)
	if r.err != nil {
		return r.err
	}
	entries, err := boxes(b.data[r.p:], b.off+r.p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.typ != "infe" {
			continue
		}
		er := &reader{b: e.data}
		v := er.n(4) >> 24
		var id uint32
		switch v {
		case 2:
			id = uint32(er.n(2))
		case 3:
			id = uint32(er.n(4))
		default:
			continue
		}
		er.n(2) // item_protection_index
		typ := er.n(4)
		if er.err != nil {
			return fmt.Errorf("infe: %w", er.err)
		}
		it := c.item(id)
		it.typ = string(binary.BigEndian.AppendUint32(nil, uint32(typ)))
	}
	return nil
}

// readIloc: ItemLocationBox (ISO/IEC 14496-12 §8.11.3).
func (c *container) readIloc(b box) error {
	r := &reader{b: b.data}
	v := r.n(4) >> 24
	sizes := r.n(2)
	offSize, lenSize, baseSize, idxSize := int(sizes>>12), int(sizes>>8&15), int(sizes>>4&15), int(sizes&15)
	if v == 0 {
		idxSize = 0
	}
	count := r.n(2)
	if v == 2 {
		count = count<<16 | r.n(2)
	}
	for range count {
		if r.err != nil {
			break
		}
		var id uint32
		if v < 2 {
			id = uint32(r.n(2))
		} else {
			id = uint32(r.n(4))
		}
		method := uint64(0)
		if v >= 1 {
			method = r.n(2) & 15
		}
		r.n(2) // data_reference_index
		base := r.n(baseSize)
		extents := r.n(2)
		it := c.item(id)
		it.fromIdat, it.located, it.extents = method == 1, method <= 1, nil
		for range extents {
			r.n(idxSize)
			off, n := r.n(offSize), r.n(lenSize)
			if method <= 1 {
				it.extents = append(it.extents, [2]uint64{base + off, n})
			}
		}
	}
	return r.err
}

// readIprp: ItemPropertiesBox (ISO/IEC 23008-12 §9.3): ipco's properties,
// one-based, and ipma's associations of items with them.
func (c *container) readIprp(b box) error {
	children, err := boxes(b.data, b.off)
	if err != nil {
		return err
	}
	ipco, ok := find(children, "ipco")
	if !ok {
		return errors.New("no ipco box")
	}
	props, err := boxes(ipco.data, ipco.off)
	if err != nil {
		return fmt.Errorf("ipco: %w", err)
	}
	for _, ipma := range children {
		if ipma.typ != "ipma" {
			continue
		}
		r := &reader{b: ipma.data}
		vf := r.n(4)
		v, flags := vf>>24, vf&0xFFFFFF
		for range r.n(4) {
			if r.err != nil {
				break
			}
			var id uint32
			if v < 1 {
				id = uint32(r.n(2))
			} else {
				id = uint32(r.n(4))
			}
			it := c.item(id)
			for range r.n(1) {
				var idx uint64
				if flags&1 != 0 {
					idx = r.n(2) & 0x7FFF
				} else {
					idx = r.n(1) & 0x7F
				}
				if idx >= 1 && idx <= uint64(len(props)) {
					it.props = append(it.props, props[idx-1])
				}
			}
		}
		if r.err != nil {
			return fmt.Errorf("ipma: %w", r.err)
		}
	}
	return nil
}

// readIref: ItemReferenceBox (ISO/IEC 14496-12 §8.11.12): dimg (a derived
// image's inputs) and auxl (an auxiliary image's master).
func (c *container) readIref(b box) error {
	r := &reader{b: b.data}
	idSize := 2
	if r.n(4)>>24 != 0 {
		idSize = 4
	}
	if r.err != nil {
		return r.err
	}
	refs, err := boxes(b.data[4:], b.off+4)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		rr := &reader{b: ref.data}
		from := uint32(rr.n(idSize))
		n := rr.n(2)
		var to []uint32
		for range n {
			to = append(to, uint32(rr.n(idSize)))
		}
		if rr.err != nil {
			return fmt.Errorf("%s: %w", ref.typ, rr.err)
		}
		switch ref.typ {
		case "dimg":
			c.item(from).dimg = append(c.item(from).dimg, to...)
		case "auxl":
			if len(to) > 0 {
				c.item(from).auxlOf = to[0]
			}
		}
	}
	return nil
}

// data returns an item's bytes, its extents joined; an extent outside the
// file is an error.
func (c *container) data(it *item) ([]byte, error) {
	src := c.file
	if it.fromIdat {
		src = c.idat.data
	}
	var out []byte
	for _, e := range it.extents {
		off, n := e[0], e[1]
		if n == 0 { // to the end of the source
			if off > uint64(len(src)) {
				return nil, fmt.Errorf("item %d: extent at %d outside the file", it.id, off)
			}
			n = uint64(len(src)) - off
		}
		if off > uint64(len(src)) || n > uint64(len(src))-off {
			return nil, fmt.Errorf("item %d: extent of %d bytes at %d outside the file", it.id, n, off)
		}
		out = append(out, src[off:off+n]...)
	}
	return out, nil
}

// ispe reads an item's ImageSpatialExtentsProperty (ISO/IEC 23008-12
// §6.5.3).
func (it *item) ispe() (w, h uint32, ok bool) {
	p, found := it.prop("ispe")
	if !found || len(p.data) < 12 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(p.data[4:]), binary.BigEndian.Uint32(p.data[8:]), true
}
