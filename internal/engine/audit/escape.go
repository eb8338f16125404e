package audit

import (
	"strings"

	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Escape makes every control, bidi, invisible and format character of s
// visible as a Go-style escape (\x1b, \u202e, \n), and escapes the
// backslash itself so that an escape in the output is never ambiguous. Audit
// content comes from the sandbox: shown raw, it could move the cursor,
// recolour or reorder what the user reads.
func Escape(s string) string { return visible.Escape(s, visible.GoForm) }

// EscapeArgv escapes each word and joins them with spaces, quoting words
// that are empty or contain a space so the word boundaries stay visible.
func EscapeArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, w := range argv {
		w = Escape(w)
		if w == "" || strings.ContainsAny(w, " '\"") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		parts[i] = w
	}
	return strings.Join(parts, " ")
}
