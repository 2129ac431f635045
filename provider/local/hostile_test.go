package local

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/normalize/normtest"
	"github.com/pgimageai/pgimageai/provider"
)

// TestJPEGScanLimit: a JPEG of more scans than max_jpeg_scans is too_large
// before it is decoded; one within it is described.
func TestJPEGScanLimit(t *testing.T) {
	tests := []struct {
		name    string
		options string
		img     []byte
		wantErr bool
	}{
		{"10 scans, the default limit", `{}`, normtest.ProgressiveJPEG(256, 10), false},
		{"101 scans, the default limit", `{}`, normtest.ProgressiveJPEG(256, 101), true},
		{"2,000 scans", `{}`, normtest.ProgressiveJPEG(2048, 2000), true},
		{"20 scans, max_jpeg_scans 10", `{"max_jpeg_scans": 10}`, normtest.ProgressiveJPEG(256, 20), true},
		{"20 scans, max_jpeg_scans 20", `{"max_jpeg_scans": 20}`, normtest.ProgressiveJPEG(256, 20), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProvider(t, tc.options)
			_, err := p.GenerateText(context.Background(), provider.Image{Data: tc.img, MIME: "image/jpeg"}, "")
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != provider.TooLarge || !strings.Contains(pe.Message, "max_jpeg_scans") {
				t.Fatalf("err %#v, want too_large naming max_jpeg_scans", err)
			}
		})
	}
}

// TestDecodeStopsAtDeadline: a decode still running at the call's deadline
// (a JPEG of 2,000 scans, allowed by its options) stops within a few scans.
func TestDecodeStopsAtDeadline(t *testing.T) {
	p := newTestProvider(t, `{"max_jpeg_scans": 100000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.GenerateText(ctx, provider.Image{Data: normtest.ProgressiveJPEG(2048, 2000), MIME: "image/jpeg"}, "")
	// The whole decode takes 25 s and more (2,000 scans of ~12.5 ms, more
	// under -race); ended at its deadline it returns within a few scans —
	// 10 s leaves room for a loaded machine and still fails without the fix.
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("returned after %s", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
}
