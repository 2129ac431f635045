package normtest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
)

// The coded images of normalize/testdata's gradient.heic (its 64 × 64 tile,
// heif-enc) and gradient.avif (64 × 48, avifenc): their decoder
// configuration (hvcC, av1C) and their data, as the files hold them.
var (
	hevcConfig = mustHex("0103700000000000000000001ef000fcfdf8f800000f03200001001840010c01ffff03700000030090000003000003001eba0240210001002a42010103700000030090000003000003001ea020810596eae4a6b9b8101030200000030020000003002122000100064401c173c089")
	hevcData   = mustHex("000001412801af04f89b08aee8f7745e77686edfa2321b7867717579fc91788c35bfa762cfde3e4ff91bfab57d006c51d21f76e32d4eee651fe81367c6e515fd9d5ac3354cde18895fb73b122156ab5e27ac4f40af9fafd391c610637128128b0340a5d029e1d9cd9ff37c6f32964377732be4409fca679d658caf5922cd127a7491e8d67d6d0017a8fe299f2998bcfdde296e46fb7bc3057ccb44c707f882f35d770a9a661507009ffa8d7999e672d09f1fb347d6b37a138d2caafd016f629180144eb923903fff86fbb33ef649da10eb2ba7742a2c0a0b16d6e9227d714d9a693f2274426ebea8170909b794d036b72e917e6ba776f1fc4be768a0e19a4aa1e7823a76cbb0783a51527cf07092f6aaed524c6c96bf0d816e361192ad31fd82b11c11703b44015902c89640cf7684b19418ba5ac9d1b87cc31213adfd1fe68e405d9a5c80")
	av1Config  = mustHex("81200000")
	av1Data    = mustHex("12000a0938157fbd8404341a40326815000410410400bf5dcceadc8cbed470cfae0063f5504fa68208b43c56b19475cef5104577ffc58f78b7a570b85a86179dd0d47d47279499907ec98e507694aab4a3fede01019072faee0229a9c00c4eff7e91fa0b1c1cce8af78a91fe1041ffcdc335252166dee2")
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// HEIC returns a HEIC file of one coded image (a 64 × 64 HEVC picture)
// whose sequence parameter set says it is coded as codedW × codedH and
// whose ispe box says ispeW × ispeH: with 64 × 64 both, a real image; with
// a large coded size and a small ispe, the decompression bomb of under a
// kilobyte that makes libde265 allocate for the coded size.
func HEIC(ispeW, ispeH, codedW, codedH uint32) []byte {
	cfg := bytes.Clone(hevcConfig)
	// The hvcC arrays: VPS, SPS, PPS, one NAL unit each.
	var out []byte
	out = append(out, cfg[:23]...)
	p := 23
	for range int(cfg[22]) {
		typ, n := cfg[p], int(binary.BigEndian.Uint16(cfg[p+1:]))
		out = append(out, cfg[p:p+3]...)
		p += 3
		for range n {
			l := int(binary.BigEndian.Uint16(cfg[p:]))
			nal := cfg[p+2 : p+2+l]
			if typ&0x3F == 33 {
				nal = resizeSPS(nal, codedW, codedH)
			}
			out = binary.BigEndian.AppendUint16(out, uint16(len(nal)))
			out = append(out, nal...)
			p += 2 + l
		}
	}
	return heifFile("heic", "hvc1", ispeW, ispeH, box("hvcC", out), hevcData)
}

// AVIF returns an AVIF file of one coded image (a 64 × 48 AV1 frame) whose
// sequence header says frames are up to codedW × codedH and whose ispe box
// says ispeW × ispeH; AVIF(64, 48, 64, 48) is the real image, AVIF(64, 64,
// 4096, 4096) the bomb.
func AVIF(ispeW, ispeH, codedW, codedH uint32) []byte {
	var data []byte
	for p := 0; p < len(av1Data); {
		h := av1Data[p]
		n, l := leb128(av1Data[p+1:])
		payload := av1Data[p+1+l : p+1+l+int(n)]
		if h>>3&15 == 1 { // sequence header
			payload = resizeSequenceHeader(payload, codedW, codedH)
		}
		data = append(data, h)
		data = appendLeb128(data, uint64(len(payload)))
		data = append(data, payload...)
		p += 1 + l + int(n)
	}
	return heifFile("avif", "av01", ispeW, ispeH, box("av1C", av1Config), data)
}

// heifFile writes a HEIF file (ISO/IEC 23008-12) of one image item: ftyp,
// meta (hdlr pict, pitm, iinf, iloc, iprp with the configuration and ispe),
// mdat.
func heifFile(brand, itemType string, w, h uint32, config, data []byte) []byte {
	full := func(typ string, vf uint32, payload ...[]byte) []byte {
		return box(typ, append(binary.BigEndian.AppendUint32(nil, vf), bytes.Join(payload, nil)...))
	}
	u16 := func(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	ftyp := box("ftyp", []byte(brand+"\x00\x00\x00\x00mif1"+brand+"miaf"))
	hdlr := full("hdlr", 0, u32(0), []byte("pict"), make([]byte, 12), []byte{0})
	pitm := full("pitm", 0, u16(1))
	iinf := full("iinf", 0, u16(1), full("infe", 2<<24, u16(1), u16(0), []byte(itemType), []byte{0}))
	ispe := full("ispe", 0, u32(w), u32(h))
	iprp := box("iprp", append(box("ipco", append(bytes.Clone(config), ispe...)),
		full("ipma", 0, u32(1), u16(1), []byte{2, 0x81, 0x82})...))
	iloc := func(off uint32) []byte {
		return full("iloc", 0, []byte{0x44, 0x00}, u16(1), u16(1), u16(0), u16(1), u32(off), u32(uint32(len(data))))
	}
	meta := full("meta", 0, hdlr, pitm, iinf, iloc(0), iprp)
	off := uint32(len(ftyp) + len(meta) + 8)
	meta = full("meta", 0, hdlr, pitm, iinf, iloc(off), iprp)
	return bytes.Join([][]byte{ftyp, meta, box("mdat", data)}, nil)
}

func box(typ string, payload []byte) []byte {
	return append(append(binary.BigEndian.AppendUint32(nil, uint32(8+len(payload))), typ...), payload...)
}

func leb128(b []byte) (uint64, int) {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]&0x7F) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return v, 8
}

func appendLeb128(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// bits is a bit string, most significant bit first.
type bits []byte

func toBits(b []byte) bits {
	out := make(bits, 0, 8*len(b))
	for _, c := range b {
		for i := 7; i >= 0; i-- {
			out = append(out, c>>i&1)
		}
	}
	return out
}

func (b bits) bytes() []byte {
	out := make([]byte, (len(b)+7)/8)
	for i, v := range b {
		out[i/8] |= v << (7 - i%8)
	}
	return out
}

func fixed(v uint64, n int) bits {
	out := make(bits, n)
	for i := range n {
		out[i] = byte(v >> (n - 1 - i) & 1)
	}
	return out
}

func ue(v uint64) bits {
	v++
	n := 0
	for x := v; x > 1; x >>= 1 {
		n++
	}
	return append(make(bits, n), fixed(v, n+1)...)
}

// trimTrailing removes the RBSP trailing bits (a one and the zeros after
// it) of a bit string.
func trimTrailing(b bits) bits {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b[:len(b)-1]
}

func withTrailing(b bits) bits {
	b = append(b, 1)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// resizeSPS rewrites pic_width_in_luma_samples and
// pic_height_in_luma_samples of an HEVC SPS NAL unit (ITU-T H.265
// §7.3.2.2; the SPS of hevcConfig has one sub-layer and chroma 4:2:0).
func resizeSPS(nal []byte, w, h uint32) []byte {
	rb := toBits(unescape(nal[2:]))
	// vps id (4), max sub layers (3), nesting (1), general profile, tier and
	// level (96): then sps id and chroma_format_idc, Exp-Golomb.
	p := 4 + 3 + 1 + 96
	for range 2 {
		p = skipUE(rb, p)
	}
	end := skipUE(rb, skipUE(rb, p))
	out := append(append(append(bits{}, rb[:p]...), ue(uint64(w))...), ue(uint64(h))...)
	out = withTrailing(append(out, trimTrailing(rb[end:])...))
	return append(bytes.Clone(nal[:2]), escape(out.bytes())...)
}

func skipUE(b bits, p int) int {
	zeros := 0
	for b[p] == 0 {
		zeros++
		p++
	}
	return p + 1 + zeros
}

// resizeSequenceHeader rewrites the frame size fields of an AV1 sequence
// header OBU's payload (AV1 §5.5; that of av1Data has a reduced still
// picture header: profile (3), still (1), reduced (1), level (5)).
func resizeSequenceHeader(payload []byte, w, h uint32) []byte {
	b := toBits(payload)
	p := 3 + 1 + 1 + 5
	wb, hb := int(b[p])<<3|int(b[p+1])<<2|int(b[p+2])<<1|int(b[p+3])+1, int(b[p+4])<<3|int(b[p+5])<<2|int(b[p+6])<<1|int(b[p+7])+1
	end := p + 8 + wb + hb
	out := append(bits{}, b[:p]...)
	out = append(out, fixed(15, 4)...) // 16 bits a side
	out = append(out, fixed(15, 4)...)
	out = append(out, fixed(uint64(w-1), 16)...)
	out = append(out, fixed(uint64(h-1), 16)...)
	out = withTrailing(append(out, trimTrailing(b[end:])...))
	return out.bytes()
}

// unescape removes H.265's emulation prevention bytes; escape adds them.
func unescape(b []byte) []byte {
	var out []byte
	zeros := 0
	for _, c := range b {
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		out = append(out, c)
		zeros = map[bool]int{true: zeros + 1, false: 0}[c == 0]
	}
	return out
}

func escape(b []byte) []byte {
	var out []byte
	zeros := 0
	for _, c := range b {
		if zeros >= 2 && c <= 3 {
			out = append(out, 3)
			zeros = 0
		}
		out = append(out, c)
		zeros = map[bool]int{true: zeros + 1, false: 0}[c == 0]
	}
	return out
}

// ProgressiveJPEG returns a progressive grey JPEG (ITU T.81, SOF2) of
// side × side pixels with scans scans: a DC scan whose every block is the
// one-bit code of "no difference", then scans-1 AC scans (1–63) each
// covering every block with end-of-band runs of 16,384 blocks (EOB14, one
// bit and 14 zeros). Every scan makes image/jpeg go over every block; the
// file stays small: 2,000 scans of a 2048 × 2048 image are some 44 KB.
func ProgressiveJPEG(side, scans int) []byte {
	var b bytes.Buffer
	seg := func(marker byte, data []byte) {
		b.Write([]byte{0xFF, marker})
		binary.Write(&b, binary.BigEndian, uint16(len(data)+2))
		b.Write(data)
	}
	b.Write([]byte{0xFF, 0xD8})
	seg(0xDB, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...))
	seg(0xC2, []byte{8, byte(side >> 8), byte(side), byte(side >> 8), byte(side), 1, 1, 0x11, 0})
	seg(0xC4, append([]byte{0x00, 1}, append(make([]byte, 15), 0)...))    // DC table 0: category 0
	seg(0xC4, append([]byte{0x10, 1}, append(make([]byte, 15), 0xE0)...)) // AC table 0: EOB14
	blocks := ((side + 7) / 8) * ((side + 7) / 8)
	seg(0xDA, []byte{1, 1, 0x00, 0, 0, 0})
	b.Write(make([]byte, (blocks+7)/8))
	runs := (blocks + 16383) / 16384
	for range scans - 1 {
		seg(0xDA, []byte{1, 1, 0x00, 1, 63, 0})
		b.Write(make([]byte, (15*runs+7)/8))
	}
	b.Write([]byte{0xFF, 0xD9})
	return b.Bytes()
}
