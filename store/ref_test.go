package store

import (
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
)

func TestCheckKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"a.jpg", true},
		{"photos/2026/a.jpg", true},
		{"photos//a.jpg", true},
		{"my photo (1).jpg", true},
		{"café.jpg", true},
		{"a..b.jpg", true},
		{"...", true},
		{"%41.jpg", true},
		{"", false},
		{"/etc/passwd", false},
		{"..", false},
		{"../a.jpg", false},
		{"photos/../../a.jpg", false},
		{"photos/./a.jpg", false},
		{"%2e%2e/a.jpg", false},
		{"%2E%2E/a.jpg", false},
		{"photos/%2e%2e/%2e%2e/a.jpg", false},
		{"%252e%252e/a.jpg", false},
		{".%2e/a.jpg", false},
		{"photos%2f..%2fa.jpg", false},
		{`photos\..\a.jpg`, false},
		{"a%5c..%5cb", false},
		{"a\x00.jpg", false},
		{"a\n.jpg", false},
		{"a%00.jpg", false},
		{"\xff.jpg", false},
		{strings.Repeat("a", maxRefLen+1), false},
	}
	for _, tt := range tests {
		e := checkKey(tt.key, false)
		if (e == nil) != tt.ok {
			t.Errorf("checkKey(%q) = %v, want ok=%v", tt.key, e, tt.ok)
		}
		if e != nil && e.Reason != ReasonBadReference {
			t.Errorf("checkKey(%q) reason = %q", tt.key, e.Reason)
		}
	}
}

func TestS3Key(t *testing.T) {
	s := &s3Store{bucket: "photos", prefix: "app/"}
	tests := []struct {
		ref, key string // key "" = bad_reference
	}{
		{"a.jpg", "app/a.jpg"},
		{"2026/a.jpg", "app/2026/a.jpg"},
		{"s3://photos/app/a.jpg", "app/a.jpg"},
		{"s3://photos/other/a.jpg", ""},  // outside the prefix
		{"s3://photos/apple/a.jpg", ""},  // a prefix is a directory, not a string prefix
		{"s3://secrets/app/a.jpg", ""},   // another bucket
		{"s3://photos", ""},              // no key
		{"s3://photos/app/../x.jpg", ""}, // climbs out
		{"https://photos.s3.amazonaws.com/app/a.jpg", ""},
		{"/app/a.jpg", ""},
		{"../a.jpg", ""},
		{"%2e%2e/a.jpg", ""},
		{"", ""},
	}
	for _, tt := range tests {
		key, err := s.key(tt.ref)
		if tt.key == "" {
			if ReasonOf(err) != ReasonBadReference {
				t.Errorf("key(%q) = %q, %v; want bad_reference", tt.ref, key, err)
			}
			continue
		}
		if err != nil || key != tt.key {
			t.Errorf("key(%q) = %q, %v; want %q", tt.ref, key, err, tt.key)
		}
	}
}

func TestPublicAddr(t *testing.T) {
	tests := []struct {
		ip     string
		public bool
	}{
		{"93.184.215.14", true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // AWS, GCP, Azure metadata
		{"fd00:ec2::254", false},   // AWS metadata over IPv6
		{"100.100.100.200", false}, // Alibaba metadata, shared address space
		{"0.0.0.0", false},
		{"::", false},
		{"fe80::1", false},
		{"fc00::1", false},
		{"224.0.0.1", false},
		{"64:ff9b::7f00:1", false}, // NAT64 of 127.0.0.1
		{"64:ff9b::5db8:d70e", true},
	}
	for _, tt := range tests {
		got, why := publicAddr(netip.MustParseAddr(tt.ip))
		if got != tt.public {
			t.Errorf("publicAddr(%s) = %v (%s), want %v", tt.ip, got, why, tt.public)
		}
	}
}

func TestReadBounded(t *testing.T) {
	body := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		r      io.Reader
		size   int64
		limit  int64
		reason string // "" = ok
	}{
		{"known size", strings.NewReader(body), 100, 100, ""},
		{"unknown size", strings.NewReader(body), -1, 100, ""},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(body)), -1, 1000, ""},
		{"size over the bound, nothing read", iotest.ErrReader(errors.New("read")), 10 << 30, 100, ReasonTooLarge},
		{"unknown size, body over the bound", strings.NewReader(body), -1, 99, ReasonTooLarge},
		{"body shorter than announced", strings.NewReader(body), 150, 1000, ReasonStoreUnavailable},
		{"body longer than announced", strings.NewReader(body), 50, 1000, ReasonStoreUnavailable},
		{"read error", iotest.TimeoutReader(strings.NewReader(body)), -1, 1000, ReasonStoreUnavailable},
		{"empty", strings.NewReader(""), 0, 10, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readBounded(tt.r, tt.size, tt.limit)
			if ReasonOf(err) != tt.reason {
				t.Fatalf("err = %v, want reason %q", err, tt.reason)
			}
			if tt.reason == "" && len(got) != int(min(int64(len(body)), max(tt.size, 0))) && tt.size >= 0 {
				t.Errorf("read %d bytes", len(got))
			}
			if tt.reason == ReasonStoreUnavailable && !IsTransient(err) {
				t.Errorf("not transient: %v", err)
			}
		})
	}
}
