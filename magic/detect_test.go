package magic

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
)

// cases is the reference table that both the unit test and the fuzz target
// agree with.
var cases = []struct {
	name    string
	in      []byte
	want    Format
	wantErr error
}{
	{"nil", nil, 0, ErrEmpty},
	{"empty", []byte{}, 0, ErrEmpty},
	{"png signature only", []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}, PNG, nil},
	{"png with IHDR", append([]byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}, "\x00\x00\x00\rIHDR"...), PNG, nil},
	{"png 7-byte prefix", []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A}, 0, ErrUnknownFormat},
	{"png last byte wrong", []byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0B}, 0, ErrUnknownFormat},
	{"jpeg", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, 'J', 'F', 'I', 'F'}, JPEG, nil},
	{"jpeg exactly 3 bytes", []byte{0xFF, 0xD8, 0xFF}, JPEG, nil},
	{"jpeg truncated", []byte{0xFF, 0xD8}, 0, ErrUnknownFormat},
	{"gif87a", []byte("GIF87a\x01\x00\x01\x00"), GIF, nil},
	{"gif89a", []byte("GIF89a"), GIF, nil},
	{"gif88a", []byte("GIF88a\x01\x00"), 0, ErrUnknownFormat},
	{"gif lower case", []byte("gif89a"), 0, ErrUnknownFormat},
	{"gif truncated", []byte("GIF89"), 0, ErrUnknownFormat},
	{"webp", []byte("RIFF\x24\x00\x00\x00WEBPVP8 "), WebP, nil},
	{"webp exactly 12", []byte("RIFF\x00\x00\x00\x00WEBP"), WebP, nil},
	{"riff wave", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), 0, ErrUnknownFormat},
	{"riff truncated 11", []byte("RIFF\x00\x00\x00\x00WEB"), 0, ErrUnknownFormat},
	{"leading zero before png", append([]byte{0}, 0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A), 0, ErrUnknownFormat},
	{"leading zeros", make([]byte, 64), 0, ErrUnknownFormat},
	{"text", []byte("hello, world"), 0, ErrUnknownFormat},
	{"heic", ftypBox("heic", "mif1", "heic"), HEIF, nil},
	{"heix", ftypBox("heix", "mif1"), HEIF, nil},
	{"mif1 major only", ftypBox("mif1"), HEIF, nil},
	{"msf1 sequence", ftypBox("msf1", "iso8"), HEIF, nil},
	{"heic compatible only", ftypBox("isom", "iso8", "heic"), HEIF, nil},
	{"avif", ftypBox("avif", "mif1", "miaf"), AVIF, nil},
	{"avis", ftypBox("avis", "msf1", "miaf"), AVIF, nil},
	{"avif compatible over mif1 major", ftypBox("mif1", "avif"), AVIF, nil},
	{"mp4", ftypBox("isom", "iso2", "mp41"), 0, ErrUnknownFormat},
	{"ftyp size 0", setSize(ftypBox("heic"), 0), 0, ErrUnknownFormat},
	{"ftyp size 1 (64-bit)", setSize(ftypBox("heic"), 1), 0, ErrUnknownFormat},
	{"ftyp size 12 ends before brands", setSize(ftypBox("isom", "heic"), 12), 0, ErrUnknownFormat},
	{"brand past declared size", setSize(ftypBox("isom", "iso2", "heic"), 20), 0, ErrUnknownFormat},
	{"brand past the 256-byte cap", ftypBox("isom", append(repeat("iso2", 70), "heic")...), 0, ErrUnknownFormat},
	{"brand inside the cap", ftypBox("isom", append(repeat("iso2", 58), "heic")...), HEIF, nil},
	{"minor version is not a brand", setMinor(ftypBox("isom"), "heic"), 0, ErrUnknownFormat},
	{"ftyp not at offset 4", append([]byte{0}, ftypBox("heic")...), 0, ErrUnknownFormat},
	{"bmp", []byte("BM6\x00\x00\x00"), BMP, nil},
	{"bmp exactly 2", []byte("BM"), BMP, nil},
	{"bm lower case", []byte("bm6\x00"), 0, ErrUnknownFormat},
	{"tiff little endian", []byte("II*\x00\x08\x00\x00\x00"), TIFF, nil},
	{"tiff big endian", []byte("MM\x00*\x00\x00\x00\x08"), TIFF, nil},
	{"tiff mixed", []byte("II\x00*"), 0, ErrUnknownFormat},
	{"bigtiff", []byte("II+\x00"), 0, ErrUnknownFormat},
	{"huge png", append([]byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}, make([]byte, 8<<20)...), PNG, nil},
	{"huge garbage", bytes.Repeat([]byte{0xAB}, 8<<20), 0, ErrUnknownFormat},
}

// ftypBox returns an ISO-BMFF ftyp box (ISO/IEC 14496-12 §4.3) with the
// major brand, minor version 0 and the compatible brands, followed by the
// start of a meta box, as HEIF and AVIF files begin.
func ftypBox(major string, compatible ...string) []byte {
	b := []byte{0, 0, 0, 0, 'f', 't', 'y', 'p'}
	b = append(b, major...)
	b = append(b, 0, 0, 0, 0)
	for _, c := range compatible {
		b = append(b, c...)
	}
	b = setSize(b, len(b))
	return append(b, "\x00\x00\x00\x21meta\x00\x00\x00\x00"...)
}

func setSize(b []byte, n int) []byte {
	b = bytes.Clone(b)
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return b
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestDetectShortPrefixes: every prefix of a recognised image shorter than
// the bytes its rule reads is unknown_format, never a guess.
func TestDetectShortPrefixes(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		need int // bytes the rule reads
		want Format
	}{
		{"png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), 8, PNG},
		{"jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF"), 3, JPEG},
		{"gif87a", []byte("GIF87a\x01\x00"), 6, GIF},
		{"gif89a", []byte("GIF89a\x01\x00"), 6, GIF},
		{"webp", []byte("RIFF\x24\x00\x00\x00WEBPVP8 "), 12, WebP},
		{"heic", ftypBox("heic", "mif1"), 16, HEIF},
		{"heic brand", ftypBox("isom", "heic"), 20, HEIF},
		{"avif", ftypBox("avif", "mif1"), 16, AVIF},
		{"avif brand", ftypBox("isom", "miaf", "avif"), 24, AVIF},
		{"bmp", []byte("BM\x36\x00"), 2, BMP},
		{"tiff le", []byte("II*\x00\x08\x00"), 4, TIFF},
		{"tiff be", []byte("MM\x00*\x00\x00"), 4, TIFF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for n := 1; n <= len(tc.in); n++ {
				got, err := Detect(tc.in[:n])
				switch {
				case n < tc.need && (err == nil || got == tc.want):
					t.Fatalf("Detect of the %d-byte prefix = %v, %v; want unknown_format", n, got, err)
				case n >= tc.need && (err != nil || got != tc.want):
					t.Fatalf("Detect of the %d-byte prefix = %v, %v; want %v", n, got, err, tc.want)
				}
			}
		})
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Detect err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("Detect = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFormatNames(t *testing.T) {
	tests := []struct {
		f          Format
		mime, name string
	}{
		{PNG, "image/png", "PNG"},
		{JPEG, "image/jpeg", "JPEG"},
		{GIF, "image/gif", "GIF"},
		{WebP, "image/webp", "WebP"},
		{HEIF, "image/heic", "HEIF"},
		{AVIF, "image/avif", "AVIF"},
		{BMP, "image/bmp", "BMP"},
		{TIFF, "image/tiff", "TIFF"},
		{0, "", "unknown"},
	}
	for _, tc := range tests {
		if tc.f.MIME() != tc.mime || tc.f.String() != tc.name {
			t.Errorf("%d: MIME %q String %q, want %q %q", tc.f, tc.f.MIME(), tc.f.String(), tc.mime, tc.name)
		}
		if slices.Contains(Formats, tc.f) {
			if f, ok := ParseMIME(tc.mime); !ok || f != tc.f {
				t.Errorf("ParseMIME(%q) = %v, %v", tc.mime, f, ok)
			}
		}
	}
	for _, m := range []string{"image/bmp", "image/heic", "image/avif", "image/tiff"} {
		if _, ok := ParseMIME(m); ok {
			t.Errorf("ParseMIME(%s) accepted: a format to convert is not one a model's formats may name", m)
		}
	}
}

func TestDataURL(t *testing.T) {
	tests := []struct {
		f    Format
		in   []byte
		want string
	}{
		{PNG, []byte{0x89, 'P', 'N', 'G'}, "data:image/png;base64,iVBORw=="},
		{JPEG, []byte{0xFF, 0xD8, 0xFF}, "data:image/jpeg;base64,/9j/"},
		{GIF, []byte("GIF89a"), "data:image/gif;base64,R0lGODlh"},
		{WebP, []byte("RIFF"), "data:image/webp;base64,UklGRg=="},
		{PNG, nil, "data:image/png;base64,"},
	}
	for _, tc := range tests {
		if got := DataURL(tc.f, tc.in); got != tc.want {
			t.Errorf("DataURL(%v, %x) = %q, want %q", tc.f, tc.in, got, tc.want)
		}
		if got := string(AppendDataURL([]byte(`{"url":"`), tc.f, tc.in)); got != `{"url":"`+tc.want {
			t.Errorf("AppendDataURL(%v, %x) = %q, want %q after the prefix", tc.f, tc.in, got, tc.want)
		}
		if n := DataURLLen(tc.f, tc.in); n != len(tc.want) {
			t.Errorf("DataURLLen(%v, %x) = %d, want %d", tc.f, tc.in, n, len(tc.want))
		}
	}
	big := bytes.Repeat([]byte{1, 2, 3, 250, 251}, 100_001)
	got := DataURL(PNG, big)
	dec, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(got, "data:image/png;base64,"))
	if err != nil || !bytes.Equal(dec, big) {
		t.Fatalf("large round trip failed: %v", err)
	}
}

func TestHead(t *testing.T) {
	in := []byte("0123456789abcdefXYZ")
	h := Head(in, 16)
	if string(h) != "0123456789abcdef" {
		t.Fatalf("Head = %q", h)
	}
	h[0] = 'Z'
	if in[0] != '0' {
		t.Fatal("Head aliases its input")
	}
	if got := Head([]byte("ab"), 16); string(got) != "ab" {
		t.Fatalf("short Head = %q", got)
	}
}

func BenchmarkDataURL1MiB(b *testing.B) {
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 1<<18)
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		_ = DataURL(PNG, img)
	}
}

func setMinor(b []byte, minor string) []byte {
	b = bytes.Clone(b)
	copy(b[12:16], minor)
	return b
}
