package clicore

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/engine/attempt"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// The parallel attempts verbs of both CLIs (docs/ATTEMPTS.md): `fork
// [PROFILE] NAME [-n N]` and `attempts [PROFILE]` with ls, diff, merge,
// rm and keep. Each backend gives them the way to its sandboxes
// (AttemptsSpec); the arguments, the names and the printing are the same.

// ForkedAttempt is one attempt a fork made.
type ForkedAttempt struct {
	Name   string `json:"name"`
	Branch string `json:"branch"`
	Base   string `json:"base,omitempty"`
	// State is how the persistent dirs were copied ("reflink", "copy",
	// "" for none) and StateBytes their size.
	State      string `json:"state,omitempty"`
	StateBytes int64  `json:"state_bytes"`
	// PausedMillis is how long the parent was paused for the copy (a
	// running parent's).
	PausedMillis int64 `json:"paused_ms,omitempty"`
}

// AttemptInfo is one attempt as `attempts ls` shows it.
type AttemptInfo struct {
	Name    string    `json:"name"`
	Branch  string    `json:"branch"`
	Running bool      `json:"running"`
	Bytes   int64     `json:"bytes"`
	Head    string    `json:"head,omitempty"`
	Subject string    `json:"subject,omitempty"`
	Created time.Time `json:"created"`
	State   string    `json:"state,omitempty"`
}

// RemovedAttempt is what `attempts rm` removed.
type RemovedAttempt struct {
	Branch string
	// Tip is where the deleted branch pointed ("" when there was none).
	Tip string
}

// AttemptsSpec is what a backend gives the verbs. profile is the
// positional profile ("" for the default).
type AttemptsSpec struct {
	Out func() io.Writer
	// Invocation is how the user runs this backend's CLI ("lazaret",
	// "lazaret --backend kubernetes"), for the hints printed.
	Invocation string
	// Fork makes the attempts names of profile's sandbox in the current
	// workspace, all or none.
	Fork   func(cmd *cobra.Command, profile string, names []string) ([]ForkedAttempt, error)
	List   func(cmd *cobra.Command, profile string) ([]AttemptInfo, error)
	Remove func(cmd *cobra.Command, profile, name string) (RemovedAttempt, error)
	// Keep makes the attempt's persistent dirs the profile's.
	Keep func(cmd *cobra.Command, profile, name string) error
	// Review runs a review verb ("diff" of two attempts' branches,
	// "merge" of one) with the verb's arguments, the profile among them.
	Review func(cmd *cobra.Command, verb string, args []string) error
	// Setup adds a backend's own flags to each command.
	Setup func(cmd *cobra.Command)
}

// NewForkCmd is the `fork` verb.
func NewForkCmd(s AttemptsSpec) *cobra.Command {
	n := 1
	cmd := &cobra.Command{
		Use:   "fork [PROFILE] NAME [-n N]",
		Short: "Fork this workspace's sandbox into N independent attempts, each on its own branch",
		Long: `Make N attempts of PROFILE's sandbox in this workspace (running or stopped):
each has its own agent branch (lazaret/agent-<profile>.<name>, starting at
the agent's last commit), its own copy of the persistent dirs (a reflink
where the file system has them), its own Trust Anchor, session keys and
secret placeholders. With -n N they are NAME-1 … NAME-N. Work in one with
--attempt NAME (shell, exec, diff, log, merge, status, stop); compare, merge,
keep or remove them with lazaret attempts.`,
		Example: `  lazaret fork try -n 3
  lazaret shell --attempt try-2
  lazaret attempts diff try-1 try-2
  lazaret attempts merge try-2`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := attempt.Names(args[len(args)-1], n)
			if err != nil {
				return UsageError{Err: fmt.Errorf("fork: %w", err)}
			}
			made, err := s.Fork(cmd, first(args, len(args)-1), names)
			if err != nil {
				return err
			}
			printForked(s.Out(), made, s.Invocation)
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "n", "n", 1, "how many attempts (NAME-1 … NAME-N)")
	setupAttempts(s, cmd)
	return cmd
}

func printForked(w io.Writer, made []ForkedAttempt, invocation string) {
	if invocation == "" {
		invocation = "lazaret"
	}
	for _, a := range made {
		state := "no persistent dirs"
		if a.State != "" {
			state = fmt.Sprintf("persistent dirs copied (%s, %s)", a.State, config.FormatSize(a.StateBytes))
		}
		if a.PausedMillis > 0 {
			state += fmt.Sprintf(", the running sandbox paused %d ms", a.PausedMillis)
		}
		base := ""
		if a.Base != "" {
			base = " at " + shortOID(a.Base)
		}
		fmt.Fprintf(w, "attempt %s: branch %s%s; %s\n", a.Name, a.Branch, base, state)
	}
	if len(made) > 0 {
		fmt.Fprintf(w, "work in one with `%s shell --attempt %s`; compare with `%s attempts`\n", invocation, made[0].Name, invocation)
	}
}

// NewAttemptsCmd is the `attempts` verb.
func NewAttemptsCmd(s AttemptsSpec) *cobra.Command {
	jsonOut := false
	ls := func(cmd *cobra.Command, args []string) error {
		as, err := s.List(cmd, first(args, len(args)))
		if err != nil {
			return err
		}
		if jsonOut {
			return writeJSON(s.Out(), as)
		}
		printAttempts(s.Out(), as)
		return nil
	}
	cmd := &cobra.Command{
		Use:   "attempts [PROFILE]",
		Short: "List, compare, merge, keep or remove this workspace's attempts (lazaret fork)",
		Args:  cobra.MaximumNArgs(1),
		RunE:  ls,
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	lsCmd := &cobra.Command{Use: "ls [PROFILE]", Short: "List the attempts: branch, state, size, last commit", Args: cobra.MaximumNArgs(1), RunE: ls}
	lsCmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.AddCommand(lsCmd, newAttemptsDiffCmd(s), newAttemptsMergeCmd(s), newAttemptsRmCmd(s), newAttemptsKeepCmd(s))
	setupAttempts(s, cmd)
	for _, sub := range cmd.Commands() {
		setupAttempts(s, sub)
	}
	return cmd
}

func setupAttempts(s AttemptsSpec, cmd *cobra.Command) {
	if s.Setup != nil {
		s.Setup(cmd)
	}
}

func printAttempts(w io.Writer, as []AttemptInfo) {
	if len(as) == 0 {
		fmt.Fprintln(w, "no attempts (lazaret fork NAME -n N makes some)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tSIZE\tBRANCH\tLAST COMMIT")
	for _, a := range as {
		st := "stopped"
		if a.Running {
			st = "running"
		}
		last := "-"
		if a.Head != "" {
			last = shortOID(a.Head) + " " + visible.Line(a.Subject)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, st, config.FormatSize(a.Bytes), a.Branch, last)
	}
	_ = tw.Flush()
}

func newAttemptsDiffCmd(s AttemptsSpec) *cobra.Command {
	return &cobra.Command{
		Use:                "diff [PROFILE] A B [--stat]",
		Short:              "What attempt B's branch changes against attempt A's",
		Args:               cobra.RangeArgs(2, 3),
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.Review(cmd, "diff", args)
		},
	}
}

func newAttemptsMergeCmd(s AttemptsSpec) *cobra.Command {
	return &cobra.Command{
		Use:                "merge [PROFILE] NAME [merge flags]",
		Short:              "Merge an attempt's branch into the checked-out branch, through the review flags (as lazaret merge)",
		Args:               cobra.RangeArgs(1, 8),
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.Review(cmd, "merge", args)
		},
	}
}

func newAttemptsRmCmd(s AttemptsSpec) *cobra.Command {
	return &cobra.Command{
		Use:   "rm [PROFILE] NAME",
		Short: "Remove an attempt: its sandbox, its data and its branch (its tip is printed)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[len(args)-1]
			r, err := s.Remove(cmd, first(args, len(args)-1), name)
			if err != nil {
				return err
			}
			if r.Tip != "" {
				fmt.Fprintf(s.Out(), "removed attempt %s; branch %s deleted (was %s: `git branch NAME %s` brings it back)\n", name, r.Branch, shortOID(r.Tip), r.Tip)
				return nil
			}
			fmt.Fprintf(s.Out(), "removed attempt %s\n", name)
			return nil
		},
	}
}

func newAttemptsKeepCmd(s AttemptsSpec) *cobra.Command {
	return &cobra.Command{
		Use:   "keep [PROFILE] NAME",
		Short: "Make an attempt's persistent dirs (/usr …) the profile's State Anchor",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[len(args)-1]
			if err := s.Keep(cmd, first(args, len(args)-1), name); err != nil {
				return err
			}
			fmt.Fprintf(s.Out(), "the persistent dirs of attempt %s are now the profile's; its branch is not merged (lazaret attempts merge %s)\n", name, name)
			return nil
		},
	}
}

// shortOID is an object name's first 12 characters.
func shortOID(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}

// ErrAttemptRunning refuses what needs a stopped attempt.
var ErrAttemptRunning = errors.New("the attempt's sandbox is running")
