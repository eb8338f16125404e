package clicore

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/policycheck"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

type policyDiffOptions struct {
	json     bool
	exitCode bool
}

// NewPolicyCmd is `lazaret policy` of both CLIs: reading policy changes
// before they are made (the agent's proposals come through the escalation
// channel). It reads configuration files only, so both backends answer
// the same.
func NewPolicyCmd(streams *IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Review what a change of the configuration's policy opens",
	}
	o := &policyDiffOptions{}
	diff := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "List what going from configuration file OLD to NEW opens and closes, each opening checked",
		Long: `Compare two configuration files and list, per profile, the names and
networks the new one allows that the old did not (and those it no longer
allows), the auto_approve rules added and removed, and the escalation
settings that change who decides. Every opening is checked by the same
deterministic checker as an agent's proposal: special ranges and
over-broad rules are "refuse", rules a human must weigh "review".`,
		Example: `  git show HEAD:lazaret.toml > /tmp/old.toml && lazaret policy diff /tmp/old.toml lazaret.toml
  lazaret policy diff --exit-code old.toml new.toml   # exit 1 when the change opens anything`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return runPolicyDiff(streams, o, args[0], args[1]) },
	}
	diff.Flags().BoolVar(&o.json, "json", false, "print JSON")
	diff.Flags().BoolVar(&o.exitCode, "exit-code", false, "exit 1 when the change opens anything")
	cmd.AddCommand(diff)
	return cmd
}

func runPolicyDiff(streams *IO, o *policyDiffOptions, oldPath, newPath string) error {
	old, err := config.Load(oldPath)
	if err != nil {
		return err
	}
	new, err := config.Load(newPath)
	if err != nil {
		return err
	}
	changes := policycheck.Diff(old, new)
	if o.json {
		if err := WriteJSON(streams.Out, struct {
			Version int                  `json:"checker_version"`
			Changes []policycheck.Change `json:"changes"`
		}{policycheck.Version, nonNil(changes)}); err != nil {
			return err
		}
	} else {
		printPolicyDiff(streams.Out, changes)
	}
	if o.exitCode && opens(changes) {
		return ExitError{Code: 1}
	}
	return nil
}

func nonNil(c []policycheck.Change) []policycheck.Change {
	if c == nil {
		return []policycheck.Change{}
	}
	return c
}

func opens(changes []policycheck.Change) bool {
	for _, c := range changes {
		if c.Opens {
			return true
		}
	}
	return false
}

// printPolicyDiff writes "+" for what opens and "-" for what closes,
// then the checker's findings under each opening. Rules come from
// configuration files, not the sandbox, but are shown escaped all the
// same: a file under review may come from anyone.
func printPolicyDiff(w io.Writer, changes []policycheck.Change) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "no policy change")
		return
	}
	for _, c := range changes {
		sign, where := "-", c.Key
		if c.Opens {
			sign = "+"
		}
		if c.Profile != "" {
			where = "profiles." + c.Profile + "." + c.Key
		}
		fmt.Fprintf(w, "%s %s %s\n", sign, where, visible.Line(c.Rule))
		if c.Check == nil {
			continue
		}
		for _, f := range c.Check.Findings {
			fmt.Fprintf(w, "    %-6s %s: %s\n", f.Severity, f.Code, visible.Line(f.Message))
		}
	}
	fmt.Fprintf(w, "(checker version %d)\n", policycheck.Version)
}

// NetCheckResult is `net check`'s answer on either backend: the decision
// and which policy gave it.
type NetCheckResult struct {
	policycheck.Decision
	Source string `json:"policy"`
	// Note is what else limits an allowed name there (the cluster's
	// NetworkPolicy), "" when nothing does.
	Note string `json:"note,omitempty"`
}

// PrintNetCheck writes r (as JSON with asJSON) and returns the verb's
// exit: nil when allowed, ExitError 1 when denied.
func PrintNetCheck(w io.Writer, r NetCheckResult, profile string, asJSON bool) error {
	if asJSON {
		if err := WriteJSON(w, r); err != nil {
			return err
		}
	} else {
		verdict, rule := "denied", ""
		if r.Allowed {
			verdict, rule = "allowed", " by "+r.Rule
		}
		fmt.Fprintf(w, "%s: %s%s (%s; profile %s)\n  %s\n", verdict, r.Target, rule, r.Source, profile, r.Why)
		if r.Note != "" {
			fmt.Fprintf(w, "  %s\n", r.Note)
		}
	}
	if !r.Allowed {
		return ExitError{Code: 1}
	}
	return nil
}
