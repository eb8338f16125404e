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
		// Every problem on its own line, not only the first.
		code, hint := classify(err)
		for _, e := range errs {
			fmt.Fprintf(g.io.ErrOut, "lazaret: %s\n", e)
		}
		fmt.Fprintf(g.io.ErrOut, "hint: %s\n", hint)
		return exitError{code}
	}
	if err != nil {
		return err
	}
	// A sandbox of a profile whose env:VAR is unset here cannot start;
	// say so, though other commands accept the file.
	var unset []error
	for _, name := range cfg.ProfileNames() {
		if err := cfg.Profiles[name].CheckEnv(); err != nil {
			unset = append(unset, err)
		}
	}
	if len(unset) > 0 {
		for _, e := range unset {
			fmt.Fprintf(g.io.ErrOut, "lazaret: %s\n", e)
		}
		_, hint := classify(unset[0])
		fmt.Fprintf(g.io.ErrOut, "hint: %s\n", hint)
		return exitError{exitConfig}
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
	return nil
}
