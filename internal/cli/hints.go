package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/lazaret-dev/lazaret/internal/config"
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

// docRef names a document of docs/ as the user can open it: the copy
// `make install` put beside this binary (PREFIX/share/doc/lazaret), else
// its place in the lazaret repository.
func docRef(name string) string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "docs/" + name
	}
	return installedDoc(exe, name)
}

func installedDoc(exe, name string) string {
	p := filepath.Join(filepath.Dir(exe), "..", "share", "doc", "lazaret", name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return filepath.Clean(p)
	}
	return "docs/" + name
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
