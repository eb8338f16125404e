package clicore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// The proposals verb of both CLIs (docs/POLICY.md): `proposals [PROFILE]`,
// `show`, `approve [--hash] [--reason] [--save]`, `deny [--reason]`. Each
// backend gives it the way to its sandbox's proposals (ProposalsSpec.Dial);
// the listing, the prompt-free answer bound to the hash and --save are
// the same.

// ProposalsClient is what the verb asks of a running sandbox's proposals
// (the coordinator's ctl.Client locally).
type ProposalsClient interface {
	ProposalsList(ctx context.Context) (ctl.ProposalsList, error)
	ProposalsShow(ctx context.Context, id string) (ctl.Proposal, error)
	ProposalAnswer(ctx context.Context, a ctl.ProposalAnswer) (ctl.ProposalAnswered, error)
	Close() error
}

// ProposalsSpec is what a backend gives the verb.
type ProposalsSpec struct {
	// Out is where the verb writes (asked when it runs).
	Out func() io.Writer
	// Dial resolves the profile (positional, "" for the default; usage
	// names the verb's other arguments for a usage error) and reaches its
	// running sandbox's proposals; profile is the resolved name.
	Dial func(cmd *cobra.Command, positional, usage string) (c ProposalsClient, profile string, err error)
	// ConfigPath is the configuration file --save edits.
	ConfigPath func() (string, error)
	// Setup adds a backend's own flags and completion to each command
	// (root is the `proposals` command itself).
	Setup func(cmd *cobra.Command, root bool)
}

type proposalsOptions struct {
	json   bool
	reason string
	hash   string
	save   bool
}

// NewProposalsCmd is the `proposals` verb.
func NewProposalsCmd(s ProposalsSpec) *cobra.Command {
	o := &proposalsOptions{}
	cmd := &cobra.Command{
		Use:   "proposals [PROFILE]",
		Short: "List, show, approve or deny the policy rules the agent proposed",
		Long: `The agent proposes a rule with lazaret-escalate --propose (a host the sandbox
may reach, or an auto_approve entry); a deterministic checker reviews it
against the sandbox's live policy and [policy] proposals says what happens.
A proposal that waits for you is listed here and shown on the proposing
session's terminal. approve applies it to the running sandbox at once (a
lookup of the name that waits for your decision then resolves); --save
also adds it to the configuration file, showing the change first.`,
		Example: `  lazaret proposals
  lazaret proposals show 1a2b3c4d
  lazaret proposals approve 1a2b3c4d --save --reason "docs site"
  lazaret proposals deny 1a2b3c4d --reason "use the mirror"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := s.Dial(cmd, first(args, len(args)), "")
			if err != nil {
				return err
			}
			defer c.Close()
			return o.list(cmd.Context(), s.Out(), c)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.AddCommand(newProposalsShowCmd(s, o), newProposalsAnswerCmd(s, o, ctl.ActionApprove), newProposalsAnswerCmd(s, o, ctl.ActionDeny))
	if s.Setup != nil {
		s.Setup(cmd, true)
		for _, sub := range cmd.Commands() {
			s.Setup(sub, false)
		}
	}
	return cmd
}

// first is args[0] when n > 0: the profile before the verb's own
// arguments.
func first(args []string, n int) string {
	if n > 0 {
		return args[0]
	}
	return ""
}

func newProposalsShowCmd(s ProposalsSpec, o *proposalsOptions) *cobra.Command {
	show := &cobra.Command{
		Use:   "show [PROFILE] ID",
		Short: "Show one proposal: the candidate rule, the checker's findings and the hash an approval names",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, err := s.Dial(cmd, first(args, len(args)-1), " ID")
			if err != nil {
				return err
			}
			defer c.Close()
			p, err := c.ProposalsShow(cmd.Context(), args[len(args)-1])
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(s.Out(), p)
			}
			PrintProposal(s.Out(), p)
			return nil
		},
	}
	show.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return show
}

func newProposalsAnswerCmd(s ProposalsSpec, o *proposalsOptions, action string) *cobra.Command {
	short := "Deny a proposal (the sandbox's policy is unchanged)"
	if action == ctl.ActionApprove {
		short = "Approve a proposal: apply it to the running sandbox now (--save: and to the configuration file)"
	}
	c := &cobra.Command{
		Use:   action + " [PROFILE] ID",
		Short: short,
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, profile, err := s.Dial(cmd, first(args, len(args)-1), " ID")
			if err != nil {
				return err
			}
			defer c.Close()
			return o.answer(cmd.Context(), s, c, profile, action, args[len(args)-1])
		},
	}
	c.Flags().StringVar(&o.reason, "reason", "", "why (recorded in the audit trail)")
	if action == ctl.ActionApprove {
		c.Flags().StringVar(&o.hash, "hash", "", "approve only the candidate with this hash (proposals show prints it)")
		c.Flags().BoolVar(&o.save, "save", false, "also add the rule to the configuration file (the change is shown first)")
	}
	return c
}

func (o *proposalsOptions) list(ctx context.Context, w io.Writer, c ProposalsClient) error {
	l, err := c.ProposalsList(ctx)
	if err != nil {
		return err
	}
	if o.json {
		if l.Proposals == nil {
			l.Proposals = []ctl.Proposal{}
		}
		return writeJSON(w, l)
	}
	if len(l.Proposals) == 0 {
		fmt.Fprintf(w, "no proposals (profile %s; [policy] proposals = %q)\n", l.Profile, l.Mode)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tRULE\tFINDINGS\tWHY")
	for _, p := range l.Proposals {
		fmt.Fprintf(tw, "%s\t%s\t%s += %s\t%s\t%s\n", p.ID, p.Status, p.Key, p.Rule, worstOf(p.Findings), clip(p.Why, 40))
	}
	return tw.Flush()
}

func (o *proposalsOptions) answer(ctx context.Context, s ProposalsSpec, c ProposalsClient, profile, action, id string) error {
	w := s.Out()
	hash := o.hash
	if action == ctl.ActionApprove && hash == "" {
		// No --hash: approve the candidate as it is shown now.
		p, err := c.ProposalsShow(ctx, id)
		if err != nil {
			return err
		}
		PrintProposal(w, p)
		hash = p.Hash
	}
	r, err := c.ProposalAnswer(ctx, ctl.ProposalAnswer{ID: id, Hash: hash, Action: action, Reason: o.reason})
	if err != nil {
		return err
	}
	p := r.Proposal
	if p.Status != ctl.ProposalApproved {
		if action == ctl.ActionApprove {
			return fmt.Errorf("proposal %s: %s", id, p.Reason)
		}
		fmt.Fprintf(w, "denied %s: %s += %s (the sandbox's policy is unchanged)\n", p.ID, p.Key, p.Rule)
		return nil
	}
	fmt.Fprintf(w, "approved %s: %s += %s is in force in the running sandbox (policy sha256 %s)\n", p.ID, p.Key, p.Rule, p.PolicyHash)
	if !o.save {
		return nil
	}
	path, err := s.ConfigPath()
	if err != nil {
		return fmt.Errorf("--save: %v", err)
	}
	return SaveRule(w, path, profile, p)
}

// writeJSON prints v indented, every invisible character made visible.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", visible.JSON(b))
	return err
}

// worstOf summarises findings: "none" or the count by severity.
func worstOf(fs []ctl.ProposalFinding) string {
	if len(fs) == 0 {
		return "none"
	}
	n := map[string]int{}
	for _, f := range fs {
		n[f.Severity]++
	}
	var parts []string
	for _, s := range []string{"refuse", "review", "info"} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// PrintProposal shows one proposal; its sandbox-chosen text came escaped
// from the sandbox's manager.
func PrintProposal(w io.Writer, p ctl.Proposal) {
	port := ""
	if p.Port != 0 {
		port = fmt.Sprintf(" (port %d asked; the policy has no ports)", p.Port)
	}
	fmt.Fprintf(w, "proposal  %s (%s)\nrule      %s += %s%s\nasked     %s\n", p.ID, p.Status, p.Key, p.Rule, port, p.Target)
	if p.Why != "" {
		fmt.Fprintf(w, "why       %s\n", p.Why)
	}
	fmt.Fprintf(w, "checker   v%d: %s\n", p.CheckerVersion, worstOf(p.Findings))
	for _, f := range p.Findings {
		fmt.Fprintf(w, "  %-7s %s: %s\n", f.Severity, f.Code, f.Message)
	}
	fmt.Fprintf(w, "hash      %s\n", p.Hash)
	if p.Status != ctl.ProposalPending {
		fmt.Fprintf(w, "decided   by %s", p.From)
		if p.Reason != "" {
			fmt.Fprintf(w, ": %s", p.Reason)
		}
		fmt.Fprintln(w)
	}
	if p.PolicyHash != "" {
		fmt.Fprintf(w, "policy    sha256 %s\n", p.PolicyHash)
	}
}

// SaveRule adds p's rule to the configuration file at path with
// config.AddRule (`proposals approve --save`): the changed lines first,
// then the file replaced atomically with its mode kept. A file AddRule
// refuses is an error saying what to add by hand; the live approval
// stands either way.
func SaveRule(w io.Writer, path, profile string, p ctl.Proposal) error {
	table := "escalation"
	if p.Key != config.KeyAutoApprove {
		table = "profiles." + profile
	}
	byHand := fmt.Sprintf("add %q to %s in [%s] of %s by hand", p.Rule, p.Key, table, path)
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		real = path
	} else if err != nil {
		return fmt.Errorf("--save: %v; %s", err, byHand)
	}
	data, err := os.ReadFile(real)
	mode := os.FileMode(0o600)
	if fi, serr := os.Stat(real); serr == nil {
		mode = fi.Mode().Perm()
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--save: %v; %s", err, byHand)
	}
	edited, err := config.AddRule(path, data, table, p.Key, p.Rule)
	if err != nil {
		return fmt.Errorf("--save: %v (the rule is in force until the sandbox stops; %s)", strings.Join(strings.Fields(err.Error()), " "), byHand)
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", path, path)
	printLineDiff(w, string(data), string(edited))
	if err := atomicfile.Write(real, edited, mode); err != nil {
		return fmt.Errorf("--save: %v; %s", err, byHand)
	}
	fmt.Fprintf(w, "saved to %s\n", path)
	return nil
}

// printLineDiff prints the lines of b that replace those of a between
// their common first and last lines (AddRule's edit is one place).
func printLineDiff(w io.Writer, a, b string) {
	al, bl := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	i := 0
	for i < len(al) && i < len(bl) && al[i] == bl[i] {
		i++
	}
	j := 0
	for j < len(al)-i && j < len(bl)-i && al[len(al)-1-j] == bl[len(bl)-1-j] {
		j++
	}
	for _, l := range al[i : len(al)-j] {
		fmt.Fprintf(w, "-%s\n", strings.TrimRight(l, "\n"))
	}
	for _, l := range bl[i : len(bl)-j] {
		fmt.Fprintf(w, "+%s\n", strings.TrimRight(l, "\n"))
	}
}
