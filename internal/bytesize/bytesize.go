// Package bytesize writes byte counts for people (0 B, 12.0 KiB, 3.5 MiB):
// one formatter for the command line and doctor. It imports nothing of ours.
//
// Layer: toolkit.
package bytesize

import "fmt"

// Format is n bytes in powers of 1024, one decimal.
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
