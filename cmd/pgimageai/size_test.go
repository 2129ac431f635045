package main

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"268435456", 256 << 20, ""},
		{"256MiB", 256 << 20, ""},
		{"256Mi", 256 << 20, ""},
		{"256mib", 256 << 20, ""},
		{"256 MiB", 256 << 20, ""},
		{" 1GiB ", 1 << 30, ""},
		{"1.5GiB", 3 << 29, ""},
		{"64KiB", 64 << 10, ""},
		{"2TiB", 2 << 40, ""},
		{"100MB", 100_000_000, ""},
		{"100M", 100_000_000, ""},
		{"1kB", 1000, ""},
		{"7B", 7, ""},
		{"0.5B", 0, ""},
		{"0", 0, ""},
		{"", 0, "is not a size"},
		{"MiB", 0, "is not a size"},
		{"256 MeB", 0, "is not a size"},
		{"-5MiB", 0, "is not a size"},
		{"1e9", 0, "is not a size"},
		{"1.2.3MB", 0, "is not a size"},
		{"9223372036854775807", 1<<63 - 1, ""},
		{"9223372036854775808", 0, "too large"},
		{"9000000TiB", 0, "too large"},
		{"9000000.5TiB", 0, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseSize(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}
