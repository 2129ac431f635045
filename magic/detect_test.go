package magic

import (
	"bytes"
	"encoding/base64"
	"errors"
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
	{"huge png", append([]byte{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}, make([]byte, 8<<20)...), PNG, nil},
	{"huge garbage", bytes.Repeat([]byte{0xAB}, 8<<20), 0, ErrUnknownFormat},
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
		{0, "", "unknown"},
	}
	for _, tc := range tests {
		if tc.f.MIME() != tc.mime || tc.f.String() != tc.name {
			t.Errorf("%d: MIME %q String %q, want %q %q", tc.f, tc.f.MIME(), tc.f.String(), tc.mime, tc.name)
		}
		if tc.f != 0 {
			if f, ok := ParseMIME(tc.mime); !ok || f != tc.f {
				t.Errorf("ParseMIME(%q) = %v, %v", tc.mime, f, ok)
			}
		}
	}
	if _, ok := ParseMIME("image/bmp"); ok {
		t.Error("ParseMIME(image/bmp) accepted")
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
