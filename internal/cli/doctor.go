package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/cli/doctor"
)

type doctorOptions struct {
	json bool
}

func newDoctorCmd(g *globalOptions) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine can run rootless gVisor sandboxes, with a fix for each problem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env := &doctor.Env{Podman: g.podmanClient(), NetdImage: netdImageRef()}
			// The State Anchor's mode check needs data_root only; a
			// configuration broken elsewhere still gives it.
			if cfg, err := g.loadDataRootConfig(); err == nil {
				env.DataRoot = cfg.DataRoot
				env.Config = cfg
			}
			results := doctor.Run(cmd.Context(), env)
			return printDoctor(g, o, results)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the results as JSON")
	return cmd
}

var errDoctor = errors.New("some checks failed")

func printDoctor(g *globalOptions, o *doctorOptions, results []doctor.Result) error {
	failed := 0
	for _, r := range results {
		if !r.OK && !r.Warning {
			failed++
		}
	}
	if o.json {
		enc := json.NewEncoder(g.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			mark := "ok  "
			switch {
			case !r.OK && r.Warning:
				mark = "warn"
			case !r.OK:
				mark = "FAIL"
			}
			fmt.Fprintf(g.io.Out, "%s  %-22s %s\n", mark, r.Name, r.Detail)
			if !r.OK && r.Fix != "" {
				fmt.Fprintf(g.io.Out, "      %-22s fix: %s\n", "", r.Fix)
			}
		}
	}
	if failed > 0 {
		return withHint(fmt.Errorf("%w: %d problem(s)", errDoctor, failed), exitSetup, "apply the fixes above, or run `make setup` in the lazaret repository")
	}
	return nil
}
