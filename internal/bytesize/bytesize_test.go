package bytesize

import "testing"

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {1536, "1.5 KiB"}, {2 << 50, "2.0 PiB"}} {
		if got := Format(tt.n); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
