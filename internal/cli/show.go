package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Everything a command prints that came from the sandbox, or through the
// coordinator or the sidecar from it (session commands, branch and file
// names, DNS names the agent asked for), is shown with package visible's
// rule: no control, bidi or invisible character reaches the terminal.

// field shows one value of a table or a message line.
func field(s string) string { return visible.Line(s) }

// argvField shows a command line, word by word.
func argvField(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = visible.Line(w)
	}
	return strings.Join(words, " ")
}

// writeJSON prints v as indented JSON with the characters encoding/json
// leaves raw (bidi, zero-width, C1) escaped as \u sequences: the same value
// for a program, nothing hidden for a human.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", visible.JSON(b))
	return err
}
