package audit

import "github.com/lazaret-dev/lazaret/internal/visible"

// EscapeJSON rewrites the hidden characters (bidi controls, zero-width and
// other format characters, C1 controls) left raw by encoding/json as \u
// escapes (visible.JSON). b must be valid JSON.
func EscapeJSON(b []byte) []byte { return visible.JSON(b) }
