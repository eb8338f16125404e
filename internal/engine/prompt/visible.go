package prompt

import "github.com/lazaret-dev/lazaret/internal/visible"

// Visible renders s so that every byte that could change what the human
// sees is shown as an escape instead of acting: C0 and C1 controls and DEL
// as \xNN (\n, \r, \t by name), bidi controls, zero-width and other format
// characters, unassigned or non-printing code points as <U+XXXX>, invalid
// UTF-8 as \xNN, and the backslash itself as \\ (package visible).
func Visible(s string) string { return visible.Escape(s, visible.AngleForm) }
