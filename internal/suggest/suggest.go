// Package suggest finds the name a person probably meant: the "did you mean"
// of the command line (commands, flags) and of configuration (provider names,
// option keys). It is a leaf: it imports nothing of ours.
//
// Layer: toolkit.
package suggest

import "strings"

// Closest returns the candidate nearest to got by edit distance (case
// folded), and false when none is near enough to be a likely typo: at most
// one edit for names of up to four characters, two up to eight, three beyond;
// a candidate that got is a prefix of (or that is a prefix of got, at least
// three characters long) also counts. Ties go to the earlier candidate.
func Closest(got string, candidates []string) (string, bool) {
	g := strings.ToLower(strings.TrimLeft(got, "-"))
	if g == "" {
		return "", false
	}
	best, bestDist := "", -1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := distance(g, lc)
		if len(g) >= 3 && (strings.HasPrefix(lc, g) || strings.HasPrefix(g, lc)) && d > 1 {
			d = 1 // "stat" for "status", "statuss" for "status"
		}
		if d <= limit(len(lc)) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best, bestDist >= 0
}

// Hint returns ` (did you mean "x"?)` for the closest candidate, or "".
func Hint(got string, candidates []string) string {
	if c, ok := Closest(got, candidates); ok && c != got {
		return ` (did you mean "` + c + `"?)`
	}
	return ""
}

func limit(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	default:
		return 3
	}
}

// distance is the optimal string alignment distance of a and b (Levenshtein
// with adjacent transpositions: "stauts" is one edit from "status"), over
// bytes: names here are ASCII.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
