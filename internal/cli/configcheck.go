package cli

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/hostres"
)

func newConfigCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect the configuration file",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Validate the configuration: prints ok, or one line per problem (file:line: key: message)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runConfigCheck(g) },
	})
	return cmd
}

func runConfigCheck(g *globalOptions) error {
	cfg, err := g.loadConfig()
	if errs := config.Errors(err); errs != nil {
		return reportConfigErrors(g, err, errs)
	}
	if err != nil {
		return err
	}
	// A sandbox of a profile whose env:VAR is unset here cannot start;
	// say so, though other commands accept the file.
	if unset := cfg.HostErrors(); len(unset) > 0 {
		return reportConfigErrors(g, config.ErrorList(unset), unset)
	}
	// So is one whose disk reserve this host's data root cannot keep.
	if errs := reserveErrors(cfg, fsSize); len(errs) > 0 {
		return reportConfigErrors(g, config.ErrorList(errs), errs)
	}
	// Accepted, but what they run is decided by files in the workspace.
	for _, w := range cfg.Escalation.RunnerWarnings {
		fmt.Fprintf(g.io.ErrOut, "lazaret: warning: %s\n", w)
	}
	if cfg.File == "" {
		path, _ := config.DefaultPath()
		fmt.Fprintf(g.io.Out, "ok: no configuration file at %s; built-in defaults (profiles: %s)\n", path, strings.Join(cfg.ProfileNames(), ", "))
		return nil
	}
	fmt.Fprintf(g.io.Out, "ok: %s (profiles: %s)\n", cfg.File, strings.Join(cfg.ProfileNames(), ", "))
	// What the file does not say but a start does: the package database
	// persisted with /usr (or not).
	for _, name := range cfg.ProfileNames() {
		if n := cfg.Profiles[name].PackageStateNote(); n != "" {
			fmt.Fprintf(g.io.Out, "profile %s: %s\n", name, n)
		}
	}
	return nil
}

// reportConfigErrors prints every problem on its own line, as
// "file:line: key: message" (the form editors jump to), then their count
// and one hint; the exit code is the configuration's (or security's).
func reportConfigErrors(g *globalOptions, err error, errs []*config.Error) error {
	for _, e := range errs {
		fmt.Fprintf(g.io.ErrOut, "%s\n", e)
	}
	where := "the configuration"
	if f := errs[0].File; f != "" {
		where = f
	}
	fmt.Fprintf(g.io.ErrOut, "lazaret: %s in %s\n", plural(len(errs), "problem"), where)
	code, _ := classify(err)
	fmt.Fprintf(g.io.ErrOut, "hint: %s\n", configHint(errs, true))
	return exitError{code}
}

// plural is "1 problem", "3 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// reserveErrors reports each disk_reserve at least as large as the
// filesystem of the data root (size gives it), once per key that sets it:
// the profile's own, else the global [resources] one (the built-in 5%
// never reaches half a disk).
func reserveErrors(cfg *config.Config, size func(string) (uint64, error)) []*config.Error {
	total, err := size(cfg.DataRoot)
	if err != nil || total == 0 {
		return nil // the start's own check says why
	}
	var data []byte
	if cfg.File != "" {
		data, _ = os.ReadFile(cfg.File)
	}
	var out []*config.Error
	seen := map[string]bool{}
	for _, name := range cfg.ProfileNames() {
		d := cfg.Profiles[name].Resources.DiskReserve
		err := d.Check(total)
		if err == nil {
			continue
		}
		key := []string{"resources", "disk_reserve"}
		if d != cfg.Resources.DiskReserve {
			key = []string{"profiles", name, "disk_reserve"}
		}
		k := strings.Join(key, ".")
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, &config.Error{File: cfg.File, Line: keyLine(data, key), Key: k,
			Msg: fmt.Sprintf("%v, which holds the data root %s", err, cfg.DataRoot)})
	}
	return out
}

// fsSize is the size of the filesystem that holds path, or would hold it.
func fsSize(path string) (uint64, error) {
	total, _, err := hostres.Filesystem(path)
	return total, err
}

// keyLine is the line of key in the TOML document data, written under a
// table header or as a dotted key (0 when not found: the error then names
// the key without a line).
func keyLine(data []byte, key []string) int {
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table, _ = keyParts(e.Key())
		case unstable.KeyValue:
			parts, off := keyParts(e.Key())
			if slices.Equal(append(slices.Clone(table), parts...), key) && off >= 0 {
				return 1 + bytes.Count(data[:off], []byte("\n"))
			}
		}
	}
	return 0
}

// keyParts are a key's parts and the offset of its first (-1: unknown).
func keyParts(it unstable.Iterator) ([]string, int) {
	var parts []string
	off := -1
	for it.Next() {
		n := it.Node()
		if off < 0 && n.Raw.Length > 0 {
			off = int(n.Raw.Offset)
		}
		parts = append(parts, string(n.Data))
	}
	return parts, off
}
