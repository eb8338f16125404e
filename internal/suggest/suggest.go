// Package suggest finds the "did you mean" candidate for a mistyped name
// (a configuration key, a profile, a flag).
package suggest

import "strings"

// maxDistance is the largest edit distance still suggested: one or two
// typos, not a different word.
const maxDistance = 2

// minPrefix is the shortest prefix suggested ("e" is no hint of "env").
const minPrefix = 3

// Nearest returns the candidate closest to name: the one at the smallest
// Levenshtein distance (at most 2), else the one name is a prefix of, or
// that is a prefix of name; "" when none is close. Ties go to the earlier
// candidate.
func Nearest(name string, candidates []string) string {
	if name == "" {
		return ""
	}
	best, bestD := "", maxDistance+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := distance(strings.ToLower(name), strings.ToLower(c), bestD); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" {
		return best
	}
	if len(name) < minPrefix {
		return ""
	}
	for _, c := range candidates {
		if c != name && len(c) >= minPrefix && (strings.HasPrefix(c, name) || strings.HasPrefix(name, c)) {
			return c
		}
	}
	return ""
}

// Hint is "; did you mean X?" for the nearest candidate, or "".
func Hint(name string, candidates []string) string {
	if c := Nearest(name, candidates); c != "" {
		return "; did you mean " + c + "?"
	}
	return ""
}

// distance is the Levenshtein distance of a and b in runes, or limit when
// it is at least limit (long hostile names cost O(len) then, not O(len²)).
func distance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(rb)], limit)
}
