package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// pendingJSON is one line of `lazaret approvals --json`: a pending
// request with the sandbox it waits in.
type pendingJSON struct {
	ctl.PendingRequest
	Profile   string `json:"profile"`
	Workspace string `json:"workspace"`
	Domain    string `json:"domain"`
}

// maxSummary bounds a request's summary in the list (it is escaped
// already; the full request is in `approvals show`).
const maxSummary = 60

type approvalsOptions struct {
	json bool
	hash string
}

func newApprovalsCmd(g *globalOptions) *cobra.Command {
	o := &approvalsOptions{}
	cmd := &cobra.Command{
		Use:   "approvals [PROFILE]",
		Short: "List the requests that wait for approval in every running sandbox of this user",
		Long: "List the pending requests (escalations, denied DNS names) of every running sandbox of this user;\n" +
			"`approvals show ID` prints one in full, `approvals answer ID approve|deny` answers it\n" +
			"(only with [escalation] answer_from = \"any\"; docs/APPROVALS.md).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApprovalsList(cmd.Context(), g, o, firstArg(args))
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	ls := &cobra.Command{
		Use:   "ls [PROFILE]",
		Short: "List the pending requests (the default)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApprovalsList(cmd.Context(), g, o, firstArg(args))
		},
	}
	ls.Flags().BoolVar(&o.json, "json", false, "print JSON")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print one pending request in full, as its prompt shows it, and its hash",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return runApprovalsShow(cmd.Context(), g, o, args[0]) },
	}
	show.Flags().BoolVar(&o.json, "json", false, "print JSON")
	answer := &cobra.Command{
		Use:   "answer ID approve|deny",
		Short: "Answer one pending request (asks y/N on a terminal; without one, approve needs --hash)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApprovalsAnswer(cmd.Context(), g, o, args[0], args[1])
		},
	}
	answer.Flags().StringVar(&o.hash, "hash", "", "the request's hash from `approvals show` (binds the answer to what you read)")
	cmd.AddCommand(ls, show, answer)
	return cmd
}

// scanPending asks every running coordinator of this user for its
// pending requests (profile: only that profile's).
func scanPending(ctx context.Context, g *globalOptions, profile string) ([]pendingJSON, []runningDomain, error) {
	list, err := scanDomains(ctx, g)
	if err != nil {
		return nil, nil, err
	}
	var out []pendingJSON
	var live []runningDomain
	for _, d := range list {
		if d.Status == nil || (profile != "" && d.Status.Profile != profile) {
			continue
		}
		live = append(live, d)
		c, err := dialSocket(ctx, d.Socket, g.log)
		if err != nil {
			continue
		}
		l, err := c.ApprovalsList(ctx)
		c.Close()
		if err != nil {
			g.log.Debug("approvals list", "domain", d.Hash, "err", err)
			continue
		}
		for _, p := range l.Pending {
			out = append(out, pendingJSON{PendingRequest: p, Profile: l.Profile, Workspace: l.Workspace, Domain: d.Hash})
		}
	}
	return out, live, nil
}

func runApprovalsList(ctx context.Context, g *globalOptions, o *approvalsOptions, profile string) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	list, _, err := scanPending(ctx, g, profile)
	if err != nil {
		return err
	}
	if o.json {
		if list == nil {
			list = []pendingJSON{}
		}
		return writeJSON(g.io.Out, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(g.io.Out, "no request waits for approval")
		return nil
	}
	printPending(g.io.Out, list, time.Now())
	return nil
}

// printPending is the table of `lazaret approvals`. Every field from the
// sandbox was escaped by the coordinator; field escapes again what the
// table would otherwise let through (tabs, newlines), and the summary is
// cut to one short line.
func printPending(w io.Writer, list []pendingJSON, now time.Time) {
	tw := newTable(w, "ID\tSESSION\tAGE\tPROFILE\tWORKSPACE\tKIND\tREQUEST")
	for _, p := range list {
		sess := "-"
		if p.Session != "" {
			sess = field(p.Session[:min(12, len(p.Session))])
			if len(p.SessionCommand) > 0 {
				sess += " (" + field(strings.Join(p.SessionCommand, " ")) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", field(p.ID), sess, roundDuration(now.Sub(p.Created)),
			field(p.Profile), field(filepath.Base(p.Workspace)), field(p.Kind), truncate(field(p.Summary), maxSummary))
	}
	tw.Flush()
}

// truncate cuts s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// findPending finds the coordinator that holds request id.
func findPending(ctx context.Context, g *globalOptions, id string) (*ctl.Client, ctl.PendingRequest, error) {
	_, live, err := scanPending(ctx, g, "")
	if err != nil {
		return nil, ctl.PendingRequest{}, err
	}
	var answered error
	for _, d := range live {
		c, err := dialSocket(ctx, d.Socket, g.log)
		if err != nil {
			continue
		}
		p, err := c.ApprovalsShow(ctx, id)
		if err == nil {
			return c, p, nil
		}
		c.Close()
		if errors.Is(err, ctl.ErrAnsweredFirst) {
			answered = err
		}
	}
	if answered != nil {
		return nil, ctl.PendingRequest{}, approvalRefusal(answered)
	}
	return nil, ctl.PendingRequest{}, withHint(fmt.Errorf("no pending request %q in any running sandbox", field(id)), exitFailure,
		"`lazaret approvals` lists the pending requests")
}

func runApprovalsShow(ctx context.Context, g *globalOptions, o *approvalsOptions, id string) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, p, err := findPending(ctx, g, id)
	if err != nil {
		return err
	}
	c.Close()
	if o.json {
		return writeJSON(g.io.Out, p)
	}
	printRequest(g.io.Out, p)
	return nil
}

// printRequest prints a request in full: lazaret's lines, then the
// request as its prompt renders it (escaped by the coordinator; each
// line escaped again here, so that no line break or control of it acts).
func printRequest(w io.Writer, p ctl.PendingRequest) {
	fmt.Fprintf(w, "id        %s\nkind      %s\nwaiting   since %s\nhash      %s\n",
		field(p.ID), field(p.Kind), p.Created.Local().Format(time.DateTime), field(p.Hash))
	if p.Session != "" {
		fmt.Fprintf(w, "session   %s\n", field(p.Session))
	}
	fmt.Fprintln(w)
	for _, line := range strings.Split(strings.TrimSuffix(p.Detail, "\n"), "\n") {
		fmt.Fprintln(w, field(line))
	}
}

func runApprovalsAnswer(ctx context.Context, g *globalOptions, o *approvalsOptions, id, action string) error {
	if action != ctl.ActionApprove && action != ctl.ActionDeny {
		return usageError{fmt.Errorf("approvals answer: %q is not an answer: want approve or deny", field(action))}
	}
	lookup, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, p, err := findPending(lookup, g, id)
	if err != nil {
		return err
	}
	defer c.Close()
	hash := o.hash
	if action == ctl.ActionApprove && hash == "" {
		in, isFile := g.io.In.(*os.File)
		if !isFile || !term.IsTerminal(int(in.Fd())) {
			return usageError{errors.New("approvals answer: approving without a terminal needs --hash (from `lazaret approvals show ID`)")}
		}
		printRequest(g.io.ErrOut, p)
		// prompt.Confirm: keys typed before the question was readable do
		// not answer it. The answer is bound to the hash shown.
		ok, err := prompt.Confirm(in, g.io.ErrOut, fmt.Sprintf("Approve request %s? [y/N] ", field(p.ID)))
		if err != nil || !ok {
			return errors.New("approvals answer: not confirmed; nothing answered")
		}
		hash = p.Hash
	}
	actx, acancel := context.WithTimeout(ctx, controlTimeout)
	defer acancel()
	d, err := c.ApprovalAnswer(actx, ctl.ApprovalAnswer{ID: p.ID, Hash: hash, Action: action})
	if err != nil {
		return approvalRefusal(err)
	}
	fmt.Fprintf(g.io.Out, "request %s: %s\n", field(p.ID), field(d.Decision))
	return nil
}

// approvalRefusal is a coordinator's refusal as one line with a hint.
func approvalRefusal(err error) error {
	msg := field(err.Error())
	switch {
	case errors.Is(err, ctl.ErrStaleRequest):
		return withHint(errors.New(msg), exitFailure, "run `lazaret approvals show ID` and answer what it shows now")
	case errors.Is(err, ctl.ErrAnsweredFirst):
		return withHint(errors.New(msg), exitFailure, "nothing to do: it was answered before yours")
	case errors.Is(err, ctl.ErrAnswerNotAllowed):
		return withHint(errors.New(msg), exitFailure, "answer it on the session's terminal, or set answer_from = \"any\" under [escalation] in the config and restart the sandbox")
	case errors.Is(err, ctl.ErrUnknownRequest):
		return withHint(errors.New(msg), exitFailure, "`lazaret approvals` lists the pending requests")
	case errors.Is(err, ctl.ErrUnknownType):
		return withHint(errors.New("the sandbox's coordinator is older than this lazaret and has no pending approvals"), exitFailure, "restart the sandbox")
	}
	return err
}
