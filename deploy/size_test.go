package deploy

import (
	"strconv"
	"strings"
	"testing"
)

// headroom is what pgimageai adds to the byte budget for its soft memory limit when
// GOMEMLIMIT is unset (cmd/pgimageai/run.go memoryHeadroom).
const headroom = 24 << 20

// mustSize parses the IEC sizes the deployment files use: 256MiB, 256Mi, 384m (compose).
func mustSize(t *testing.T, s string) int64 {
	t.Helper()
	units := []struct {
		suffix string
		mult   int64
	}{{"MiB", 1 << 20}, {"GiB", 1 << 30}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"m", 1 << 20}, {"g", 1 << 30}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("size %q: %v", s, err)
			}
			return v * u.mult
		}
	}
	t.Fatalf("size %q has no unit this test knows", s)
	return 0
}
