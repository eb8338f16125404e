package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// verbLine is the lazaret command line of verb for profile, as a hint
// shows it: `lazaret stop`, or `lazaret stop claude` for another profile
// than the default (a hint naming the wrong profile would act on another
// sandbox).
func verbLine(verb, profile string) string {
	if profile == "" || profile == config.DefaultProfileName {
		return "`lazaret " + verb + "`"
	}
	return "`lazaret " + verb + " " + profile + "`"
}

// newTable is the CLI's table writer on w (columns two spaces apart),
// with header as its first line when not empty.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, header)
	}
	return tw
}
