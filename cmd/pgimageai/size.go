package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units parseSize accepts, case-insensitively: SI (powers of 1000),
// IEC (powers of 1024) as Go's GOMEMLIMIT writes them (KiB, MiB, …), and as Kubernetes
// quantities write them (Ki, Mi, …).
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
}

// parseSize parses a size in bytes: a plain number ("268435456") or a number with a unit
// ("256MiB", "256Mi", "1.5 GB", "64kb"). Fractions of a byte are rounded down.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, or a number with a unit: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err == nil && (n == 0 || n <= math.MaxInt64/int64(mult)) {
			return n * int64(mult), nil
		}
		return 0, fmt.Errorf("size %q is too large", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %v", s, err)
	}
	v := math.Floor(f * mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}
