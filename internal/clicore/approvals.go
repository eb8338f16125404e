package clicore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
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

// Approvals is the approvals verb of a CLI (both have the same): the
// pending requests of every local coordinator of this user and of every
// lazaret-kube session running on this machine (their control sockets in
// the runtime directory: ControlSockets), whichever CLI asks.
type Approvals struct {
	IO IO
	// Log is the CLI's log (set once its flags are parsed).
	Log func() *slog.Logger
	// Invocation is how the user runs this CLI, for hints.
	Invocation string
}

// controlTimeout bounds each exchange with a control socket.
const controlTimeout = 10 * time.Second

type approvalsOptions struct {
	json bool
	hash string
}

// NewApprovalsCmd is the approvals verb (ls, show, answer).
func NewApprovalsCmd(g *Approvals) *cobra.Command {
	o := &approvalsOptions{}
	cmd := &cobra.Command{
		Use:   "approvals [PROFILE]",
		Short: "List the requests that wait for approval in every running sandbox of this user",
		Long: "List the pending requests (escalations, denied DNS names) of every running sandbox of this user on\n" +
			"this machine, whichever backend runs it (local coordinators and cluster sessions alike);\n" +
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

// ControlSockets are the control sockets of this user's running
// sandboxes on this machine: every local coordinator's and every
// lazaret-kube session's (domain's one table of paths, a wildcard name).
func ControlSockets() ([]string, error) {
	rt, err := domain.RuntimeDir()
	if err != nil {
		return nil, err
	}
	coords, err := filepath.Glob((&domain.Anchor{RuntimeDir: rt, Hash: "*"}).ControlSocket())
	if err != nil {
		return nil, err
	}
	kube, err := filepath.Glob(domain.KubeSessionSocket(rt, "*"))
	if err != nil {
		return nil, err
	}
	return append(coords, kube...), nil
}

// DialControl connects to the control socket at path without attaching
// a session.
func DialControl(ctx context.Context, path string, log *slog.Logger) (*ctl.Client, error) {
	c := ctl.NewClient(log)
	if err := c.Connect(ctx, path, ctl.Hello{}); err != nil {
		return nil, err
	}
	return c, nil
}

// liveSocket is a control socket that answered, and its sandbox's status.
type liveSocket struct {
	path   string
	status ctl.Status
}

// scanPending asks every control socket of this user for its pending
// requests (profile: only that profile's sandboxes).
func scanPending(ctx context.Context, g *Approvals, profile string) ([]pendingJSON, []liveSocket, error) {
	socks, err := ControlSockets()
	if err != nil {
		return nil, nil, err
	}
	var out []pendingJSON
	var live []liveSocket
	for _, s := range socks {
		c, err := DialControl(ctx, s, g.Log())
		if err != nil {
			continue
		}
		st, err := c.Status(ctx)
		if err != nil || (profile != "" && st.Profile != profile) {
			c.Close()
			continue
		}
		live = append(live, liveSocket{path: s, status: st})
		l, err := c.ApprovalsList(ctx)
		c.Close()
		if err != nil {
			g.Log().Debug("approvals list", "socket", s, "err", err)
			continue
		}
		for _, p := range l.Pending {
			out = append(out, pendingJSON{PendingRequest: p, Profile: l.Profile, Workspace: l.Workspace, Domain: st.Domain})
		}
	}
	return out, live, nil
}

func runApprovalsList(ctx context.Context, g *Approvals, o *approvalsOptions, profile string) error {
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
		return WriteJSON(g.IO.Out, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(g.IO.Out, "no request waits for approval")
		return nil
	}
	printPending(g.IO.Out, list, time.Now())
	return nil
}

// printPending is the table of `lazaret approvals`. Every field from the
// sandbox was escaped by the coordinator; field escapes again what the
// table would otherwise let through (tabs, newlines), and the summary is
// cut to one short line.
func printPending(w io.Writer, list []pendingJSON, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tAGE\tPROFILE\tWORKSPACE\tKIND\tREQUEST")
	for _, p := range list {
		sess := "-"
		if p.Session != "" {
			sess = visible.Line(p.Session[:min(12, len(p.Session))])
			if len(p.SessionCommand) > 0 {
				sess += " (" + visible.Line(strings.Join(p.SessionCommand, " ")) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visible.Line(p.ID), sess, now.Sub(p.Created).Round(time.Second),
			visible.Line(p.Profile), visible.Line(filepath.Base(p.Workspace)), visible.Line(p.Kind), truncate(visible.Line(p.Summary), maxSummary))
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
func findPending(ctx context.Context, g *Approvals, id string) (*ctl.Client, ctl.PendingRequest, error) {
	_, live, err := scanPending(ctx, g, "")
	if err != nil {
		return nil, ctl.PendingRequest{}, err
	}
	var answered error
	for _, d := range live {
		c, err := DialControl(ctx, d.path, g.Log())
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
	return nil, ctl.PendingRequest{}, WithHint(fmt.Errorf("no pending request %q in any running sandbox", visible.Line(id)), exitcode.Failure,
		"`"+g.Invocation+" approvals` lists the pending requests")
}

func runApprovalsShow(ctx context.Context, g *Approvals, o *approvalsOptions, id string) error {
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	c, p, err := findPending(ctx, g, id)
	if err != nil {
		return err
	}
	c.Close()
	if o.json {
		return WriteJSON(g.IO.Out, p)
	}
	printRequest(g.IO.Out, p)
	return nil
}

// printRequest prints a request in full: lazaret's lines, then the
// request as its prompt renders it (escaped by the coordinator; each
// line escaped again here, so that no line break or control of it acts).
func printRequest(w io.Writer, p ctl.PendingRequest) {
	fmt.Fprintf(w, "id        %s\nkind      %s\nwaiting   since %s\nhash      %s\n",
		visible.Line(p.ID), visible.Line(p.Kind), p.Created.Local().Format(time.DateTime), visible.Line(p.Hash))
	if p.Session != "" {
		fmt.Fprintf(w, "session   %s\n", visible.Line(p.Session))
	}
	fmt.Fprintln(w)
	for _, line := range strings.Split(strings.TrimSuffix(p.Detail, "\n"), "\n") {
		fmt.Fprintln(w, visible.Line(line))
	}
}

func runApprovalsAnswer(ctx context.Context, g *Approvals, o *approvalsOptions, id, action string) error {
	if action != ctl.ActionApprove && action != ctl.ActionDeny {
		return UsageError{fmt.Errorf("approvals answer: %q is not an answer: want approve or deny", visible.Line(action))}
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
		in, isFile := g.IO.In.(*os.File)
		if !isFile || !term.IsTerminal(int(in.Fd())) {
			return UsageError{errors.New("approvals answer: approving without a terminal needs --hash (from `lazaret approvals show ID`)")}
		}
		printRequest(g.IO.ErrOut, p)
		// prompt.Confirm: keys typed before the question was readable do
		// not answer it. The answer is bound to the hash shown.
		ok, err := prompt.Confirm(in, g.IO.ErrOut, fmt.Sprintf("Approve request %s? [y/N] ", visible.Line(p.ID)))
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
	fmt.Fprintf(g.IO.Out, "request %s: %s\n", visible.Line(p.ID), visible.Line(d.Decision))
	return nil
}

// approvalRefusal is a coordinator's refusal as one line with a hint.
func approvalRefusal(err error) error {
	msg := visible.Line(err.Error())
	switch {
	case errors.Is(err, ctl.ErrStaleRequest):
		return WithHint(errors.New(msg), exitcode.Failure, "run `lazaret approvals show ID` and answer what it shows now")
	case errors.Is(err, ctl.ErrAnsweredFirst):
		return WithHint(errors.New(msg), exitcode.Failure, "nothing to do: it was answered before yours")
	case errors.Is(err, ctl.ErrAnswerNotAllowed):
		return WithHint(errors.New(msg), exitcode.Failure, "answer it on the session's terminal, or set answer_from = \"any\" under [escalation] in the config and restart the sandbox")
	case errors.Is(err, ctl.ErrUnknownRequest):
		return WithHint(errors.New(msg), exitcode.Failure, "`lazaret approvals` lists the pending requests")
	case errors.Is(err, ctl.ErrUnknownType):
		return WithHint(errors.New("the sandbox's coordinator is older than this lazaret and has no pending approvals"), exitcode.Failure, "restart the sandbox")
	}
	return err
}

// firstArg is args[0], "" without one.
func firstArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return ""
}

// WriteJSON writes v indented, with every invisible character escaped.
func WriteJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", visible.JSON(b))
	return err
}
