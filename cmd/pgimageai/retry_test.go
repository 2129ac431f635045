package main

import (
	"encoding/json"
	"testing"
)

func TestRetryRequestJSON(t *testing.T) {
	tests := []struct {
		name string
		req  retryRequest
		want string
	}{
		{"all", retryRequest{}, `{}`},
		{"rule", retryRequest{Rule: "caption"}, `{"rule":"caption"}`},
		{"reason", retryRequest{Reason: "provider_error"}, `{"reason":"provider_error"}`},
		{"both", retryRequest{Rule: `odd "name"`, Reason: "too_large"}, `{"rule":"odd \"name\"","reason":"too_large"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.req)
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestRetryText(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{1, "1 open error matches; the running bridge will reprocess it at WAL position 0/1A2B3C0"},
		{3, "3 open errors match; the running bridge will reprocess them at WAL position 0/1A2B3C0"},
	}
	for _, tc := range tests {
		if got := retryText(tc.n, 0x1A2B3C0); got != tc.want {
			t.Errorf("retryText(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
