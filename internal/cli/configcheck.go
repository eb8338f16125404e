package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/config"
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
