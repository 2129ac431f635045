package normalize

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The coded size of an image is what its decoder allocates for: HEVC's
// pic_width_in_luma_samples × pic_height_in_luma_samples in a sequence
// parameter set (ITU-T H.265 §7.3.2.2), AV1's max_frame_width_minus_1 + 1
// × max_frame_height_minus_1 + 1 in a sequence header (AV1 bitstream
// specification §5.5). A file's ispe box may say anything else; the
// decoder goes by the bitstream.

// hevcSlack is how far an HEVC coded side may pass its ispe side: HEVC
// codes whole minimal coding blocks (8 to 64 samples) and crops with a
// conformance window, and libheif crops the decoded image to ispe. AV1
// codes any size: an AV1 image may not pass its ispe at all (libavif hands
// out the decoded frame as it is).
const hevcSlack = 64

// bitReader reads bits most significant first, as H.265 and AV1 write them.
type bitReader struct {
	b   []byte
	pos int // in bits
	err error
}

func (r *bitReader) u(n int) uint64 {
	var v uint64
	for range n {
		if r.pos >= 8*len(r.b) {
			r.err = errors.New("header ends early")
			return 0
		}
		v = v<<1 | uint64(r.b[r.pos/8]>>(7-r.pos%8)&1)
		r.pos++
	}
	return v
}

// ue reads an Exp-Golomb code (H.265 §9.2), at most 32 leading zeros.
func (r *bitReader) ue() uint64 {
	zeros := 0
	for r.u(1) == 0 && r.err == nil {
		zeros++
		if zeros > 32 {
			r.err = errors.New("Exp-Golomb code too long")
			return 0
		}
	}
	return 1<<zeros - 1 + r.u(zeros)
}

// uvlc reads AV1's variable-length code (§4.10.3).
func (r *bitReader) uvlc() uint64 {
	zeros := 0
	for r.u(1) == 0 && r.err == nil {
		zeros++
		if zeros >= 32 {
			r.err = errors.New("uvlc too long")
			return 0
		}
	}
	return 1<<zeros - 1 + r.u(zeros)
}

// rbsp removes H.265's emulation prevention bytes (00 00 03).
func rbsp(nal []byte) []byte {
	out := make([]byte, 0, len(nal))
	zeros := 0
	for _, c := range nal {
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		out = append(out, c)
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	return out
}

const hevcSPS = 33

// hevcSPSSize reads pic_width_in_luma_samples and pic_height_in_luma_samples
// of an SPS NAL unit, its two-byte NAL header included.
func hevcSPSSize(nal []byte) (w, h uint64, err error) {
	w, h, _, _, err = hevcSPSFields(nal)
	return w, h, err
}

// hevcSPSFields is hevcSPSSize and where the two fields are: bits start to
// end of the SPS's RBSP (after the NAL header, emulation prevention
// removed).
func hevcSPSFields(nal []byte) (w, h uint64, start, end int, err error) {
	if len(nal) < 3 || (nal[0]>>1)&0x3F != hevcSPS {
		return 0, 0, 0, 0, errors.New("not a sequence parameter set")
	}
	r := &bitReader{b: rbsp(nal[2:])}
	r.u(4) // sps_video_parameter_set_id
	sub := int(r.u(3))
	r.u(1) // sps_temporal_id_nesting_flag
	// profile_tier_level(1, sps_max_sub_layers_minus1), §7.3.3.
	r.u(88) // general profile: space, tier, idc, 32 compatibility flags, 4 constraint flags, 43 + 1 bits
	r.u(8)  // general_level_idc
	profile, level := make([]bool, sub), make([]bool, sub)
	for i := range sub {
		profile[i], level[i] = r.u(1) == 1, r.u(1) == 1
	}
	if sub > 0 {
		r.u(2 * (8 - sub))
	}
	for i := range sub {
		if profile[i] {
			r.u(88)
		}
		if level[i] {
			r.u(8)
		}
	}
	r.ue() // sps_seq_parameter_set_id
	if r.ue() == 3 {
		r.u(1) // separate_colour_plane_flag
	}
	start = r.pos
	w, h = r.ue(), r.ue()
	if r.err != nil {
		return 0, 0, 0, 0, fmt.Errorf("sequence parameter set: %w", r.err)
	}
	return w, h, start, r.pos, nil
}

// hevcCodedSizes returns the size of every SPS of an HEVC item: those of
// its hvcC box (ISO/IEC 14496-15 §8.3.3) and those in its data, NAL units
// prefixed by their length; the decoder takes both.
func hevcCodedSizes(hvcC, data []byte) ([][2]uint64, error) {
	// hvcC is a plain Box, not a FullBox: its payload starts with
	// configurationVersion.
	cfg := hvcC
	if len(cfg) < 23 {
		return nil, errors.New("hvcC box too short")
	}
	lengthSize := int(cfg[21]&3) + 1
	var nals [][]byte
	p, arrays := 23, int(cfg[22])
	for range arrays {
		if p+3 > len(cfg) {
			return nil, errors.New("hvcC arrays run past the end")
		}
		n := int(binary.BigEndian.Uint16(cfg[p+1:]))
		p += 3
		for range n {
			if p+2 > len(cfg) {
				return nil, errors.New("hvcC NAL unit runs past the end")
			}
			l := int(binary.BigEndian.Uint16(cfg[p:]))
			if p+2+l > len(cfg) {
				return nil, errors.New("hvcC NAL unit runs past the end")
			}
			nals = append(nals, cfg[p+2:p+2+l])
			p += 2 + l
		}
	}
	for p := 0; p < len(data); {
		if p+lengthSize > len(data) {
			return nil, errors.New("NAL unit length runs past the end of the item")
		}
		var l uint64
		for _, c := range data[p : p+lengthSize] {
			l = l<<8 | uint64(c)
		}
		p += lengthSize
		if l > uint64(len(data)-p) {
			return nil, errors.New("NAL unit runs past the end of the item")
		}
		nals = append(nals, data[p:p+int(l)])
		p += int(l)
	}
	var sizes [][2]uint64
	for _, nal := range nals {
		if len(nal) < 2 || (nal[0]>>1)&0x3F != hevcSPS {
			continue
		}
		w, h, err := hevcSPSSize(nal)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, [2]uint64{w, h})
	}
	return sizes, nil
}

const av1SequenceHeader = 1

// av1Obus calls fn with the type and payload of every OBU of b (AV1 §5.3);
// an OBU without a size field takes the rest.
func av1Obus(b []byte, fn func(typ byte, payload []byte) error) error {
	for p := 0; p < len(b); {
		h := b[p]
		typ, ext, hasSize := h>>3&15, h&4 != 0, h&2 != 0
		p++
		if ext {
			p++
		}
		n := uint64(len(b) - p)
		if hasSize {
			var v uint64
			var i int
			for i = 0; i < 8; i++ {
				if p >= len(b) {
					return errors.New("OBU size runs past the end")
				}
				c := b[p]
				p++
				v |= uint64(c&0x7F) << (7 * i)
				if c&0x80 == 0 {
					break
				}
			}
			n = v
		}
		if p > len(b) || n > uint64(len(b)-p) {
			return errors.New("OBU runs past the end")
		}
		if err := fn(typ, b[p:p+int(n)]); err != nil {
			return err
		}
		p += int(n)
	}
	return nil
}

// av1SequenceSize reads max_frame_width_minus_1 + 1 and
// max_frame_height_minus_1 + 1 of a sequence header OBU's payload (§5.5).
func av1SequenceSize(payload []byte) (w, h uint64, err error) {
	w, h, _, _, err = av1SequenceFields(payload)
	return w, h, err
}

// av1SequenceFields is av1SequenceSize and where the size is: bits start
// (frame_width_bits_minus_1) to end (after max_frame_height_minus_1).
func av1SequenceFields(payload []byte) (w, h uint64, start, end int, err error) {
	r := &bitReader{b: payload}
	r.u(3)           // seq_profile
	r.u(1)           // still_picture
	if r.u(1) == 1 { // reduced_still_picture_header
		r.u(5) // seq_level_idx[0]
	} else {
		decoderModel := false
		bufferDelayLength := 0
		if r.u(1) == 1 { // timing_info_present_flag
			r.u(32)          // num_units_in_display_tick
			r.u(32)          // time_scale
			if r.u(1) == 1 { // equal_picture_interval
				r.uvlc()
			}
			if r.u(1) == 1 { // decoder_model_info_present_flag
				decoderModel = true
				bufferDelayLength = int(r.u(5)) + 1
				r.u(32) // num_units_in_decoding_tick
				r.u(5)  // buffer_removal_time_length_minus_1
				r.u(5)  // frame_presentation_time_length_minus_1
			}
		}
		displayDelay := r.u(1) == 1
		points := int(r.u(5)) + 1
		for range points {
			r.u(12) // operating_point_idc
			if r.u(5) > 7 {
				r.u(1) // seq_tier
			}
			if decoderModel && r.u(1) == 1 {
				r.u(2*bufferDelayLength + 1)
			}
			if displayDelay && r.u(1) == 1 {
				r.u(4)
			}
		}
	}
	start = r.pos
	wb, hb := int(r.u(4))+1, int(r.u(4))+1
	w, h = r.u(wb)+1, r.u(hb)+1
	if r.err != nil {
		return 0, 0, 0, 0, fmt.Errorf("sequence header: %w", r.err)
	}
	return w, h, start, r.pos, nil
}

// av1CodedSizes returns the size of every sequence header of an AV1 item:
// those of its av1C box's configOBUs (AV1-ISOBMFF §2.3.3, after its four
// bytes) and those in its data; the decoder takes both.
func av1CodedSizes(av1C, data []byte) ([][2]uint64, error) {
	if len(av1C) < 4 {
		return nil, errors.New("av1C box too short")
	}
	var sizes [][2]uint64
	collect := func(typ byte, payload []byte) error {
		if typ != av1SequenceHeader {
			return nil
		}
		w, h, err := av1SequenceSize(payload)
		if err != nil {
			return err
		}
		sizes = append(sizes, [2]uint64{w, h})
		return nil
	}
	if err := av1Obus(av1C[4:], collect); err != nil {
		return nil, fmt.Errorf("av1C: %w", err)
	}
	if err := av1Obus(data, collect); err != nil {
		return nil, err
	}
	return sizes, nil
}
