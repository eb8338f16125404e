package clicore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/suggest"
)

// invocationKey is the root's annotation holding how the user runs the
// CLI, when that is not the root's name (lazaret-kube is run as
// `lazaret --backend kubernetes`).
const invocationKey = "lazaret.invocation"

// RootSpec is what a CLI says of its root command.
type RootSpec struct {
	Use, Short, Long string
	// Invocation is how the user runs the CLI, for messages and hints;
	// empty: Use.
	Invocation string
	Flags      GlobalFlags
	// SetLog receives the log (NewLog on the command's stderr, per
	// --verbose) before any verb runs.
	SetLog func(*slog.Logger)
}

// NewRoot is a CLI's root command with what both share: errors and usage
// are printed by ExitCode alone, the global flags, the log, and flag
// errors as usage errors naming the nearest flag. The backend adds its
// own flags and verbs, then calls GroupCommands.
func NewRoot(s RootSpec) *cobra.Command {
	root := &cobra.Command{
		Use:           s.Use,
		Short:         s.Short,
		Long:          s.Long,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			s.SetLog(NewLog(cmd.ErrOrStderr(), *s.Flags.Verbose))
			return nil
		},
	}
	if s.Invocation != "" {
		root.Annotations = map[string]string{invocationKey: s.Invocation}
	}
	s.Flags.Register(root.PersistentFlags())
	root.SetFlagErrorFunc(FlagError)
	return root
}

// Execute runs root with args (without the program name) on streams, in
// a context that SIGINT and SIGTERM cancel (a clean exit, not an error),
// and returns the process exit code (ExitCode).
func Execute(root *cobra.Command, args []string, streams IO, classify Classify) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	if cmd == nil {
		cmd = root
	}
	return ExitCode(UsageHint(cmd, err), streams.ErrOut, classify)
}

// CommandPath is cmd's command line as the user types it.
func CommandPath(cmd *cobra.Command) string {
	root := cmd.Root()
	inv := root.Annotations[invocationKey]
	if inv == "" {
		return cmd.CommandPath()
	}
	return inv + strings.TrimPrefix(cmd.CommandPath(), root.Name())
}

// GroupCommands makes every command that only groups subcommands (the
// root, net, config, image) answer an unknown subcommand with a usage
// error naming the nearest verb, instead of cobra's default for nested
// groups: printing the help and exiting 0 as if it had worked. Argument
// count errors of every command become usage errors too.
func GroupCommands(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return UnknownCommand(cmd, args[0])
		}
	}
	if check := c.Args; check != nil {
		// A wrong number of arguments is a usage error (exit 2, hint),
		// not a failure.
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return UsageError{Err: asInvoked(cmd, err)}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		GroupCommands(sub)
	}
}

// asInvoked is cobra's err about cmd naming cmd as the user runs it
// (cobra names the root's Use).
func asInvoked(cmd *cobra.Command, err error) error {
	path, as := strconv.Quote(cmd.CommandPath()), strconv.Quote(CommandPath(cmd))
	if path == as || !strings.Contains(err.Error(), path) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), path, as))
}

// UnknownCommand is the usage error of an unknown verb under cmd. Hidden
// commands (the internal __coordinator) are never suggested; an alias is
// suggested as the command's name.
func UnknownCommand(cmd *cobra.Command, name string) error {
	var names []string
	canonical := map[string]string{}
	for _, sub := range cmd.Commands() {
		if !sub.IsAvailableCommand() && sub.Name() != "help" {
			continue
		}
		for _, n := range append([]string{sub.Name()}, append(sub.Aliases, sub.SuggestFor...)...) {
			names = append(names, n)
			canonical[n] = sub.Name()
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, CommandPath(cmd))
	if near := suggest.Nearest(name, names); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", canonical[near])
	}
	return UsageError{Err: errors.New(msg)}
}

// FlagError is the usage error of a bad flag; an unknown one names the
// nearest flag of the command (pflag does not).
func FlagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || len(ne.GetSpecifiedName()) < 2 {
		return UsageError{Err: err}
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
		}
	})
	if near := suggest.Nearest(ne.GetSpecifiedName(), names); near != "" {
		return UsageError{Err: fmt.Errorf("%w; did you mean --%s?", err, near)}
	}
	return UsageError{Err: err}
}

// UsageHint points a usage error at the help of the command it belongs to.
func UsageHint(cmd *cobra.Command, err error) error {
	var ue UsageError
	var he *HintError
	if cmd == nil || !errors.As(err, &ue) || errors.As(err, &he) {
		return err
	}
	return WithHint(err, exitcode.Usage, "run `"+CommandPath(cmd)+" --help` for usage")
}
