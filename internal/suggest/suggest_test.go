package suggest

import (
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	keys := []string{"image", "persistent_dirs", "allow_egress", "allow_domains", "env", "volumes", "git_mode"}
	for name, want := range map[string]string{
		"allow_egres":   "allow_egress",
		"alow_egress":   "allow_egress",
		"Image":         "image",
		"imgae":         "image",
		"persistent":    "persistent_dirs", // prefix
		"volume":        "volumes",
		"gitmode":       "git_mode",
		"totally_wrong": "",
		"":              "",
		"image":         "", // itself is not a suggestion
	} {
		if got := Nearest(name, keys); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
	if got := Hint("imgae", keys); got != "; did you mean image?" {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("zzz", keys); got != "" {
		t.Errorf("Hint = %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"kitten", "sitting", 3}, {"", "abc", 3}, {"abc", "abc", 0}, {"ab", "ba", 2}, {"é", "e", 1},
	} {
		if got := distance(tc.a, tc.b, 10); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	// A long name is cut off at the limit.
	if got := distance(strings.Repeat("a", 1e5), "a", 3); got != 3 {
		t.Errorf("long: %d", got)
	}
}
