package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lazaret-dev/lazaret/internal/suggest"
)

// groupCommands makes every command that only groups subcommands (the
// root, net, config, image) answer an unknown subcommand with a usage
// error naming the nearest verb, instead of cobra's default for nested
// groups: printing the help and exiting 0 as if it had worked. Argument
// count errors of every command become usage errors too.
func groupCommands(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}
	}
	if check := c.Args; check != nil {
		// A wrong number of arguments is a usage error (exit 2, hint),
		// not a failure.
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		groupCommands(sub)
	}
}

// unknownCommand is the usage error of an unknown verb under cmd. Hidden
// commands (the internal __coordinator) are never suggested; an alias is
// suggested as the command's name.
func unknownCommand(cmd *cobra.Command, name string) error {
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
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if near := suggest.Nearest(name, names); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", canonical[near])
	}
	return usageError{errors.New(msg)}
}

// flagError is the usage error of a bad flag; an unknown one names the
// nearest flag of the command (pflag does not).
func flagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || len(ne.GetSpecifiedName()) < 2 {
		return usageError{err}
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
		}
	})
	if near := suggest.Nearest(ne.GetSpecifiedName(), names); near != "" {
		return usageError{fmt.Errorf("%w; did you mean --%s?", err, near)}
	}
	return usageError{err}
}

// usageHint points a usage error at the help of the command it belongs to.
func usageHint(cmd *cobra.Command, err error) error {
	var ue usageError
	var he *hintError
	if cmd == nil || !errors.As(err, &ue) || errors.As(err, &he) {
		return err
	}
	return withHint(err, exitUsage, "run `"+cmd.CommandPath()+" --help` for usage")
}
