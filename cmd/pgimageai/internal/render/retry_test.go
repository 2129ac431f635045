package render

import (
	"testing"
)

func TestRetryText(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{1, "1 open error matches; the running bridge will reprocess it at WAL position 0/1A2B3C0"},
		{3, "3 open errors match; the running bridge will reprocess them at WAL position 0/1A2B3C0"},
	}
	for _, tc := range tests {
		if got := RetryText(tc.n, 0x1A2B3C0); got != tc.want {
			t.Errorf("RetryText(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
