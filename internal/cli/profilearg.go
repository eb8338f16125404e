package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Every verb that acts on one sandbox takes its profile the same way:
// `lazaret VERB [PROFILE] …`, the default profile when omitted. `net` and
// `domain` took a --profile/-p flag before; it still works, hidden, with a
// one-line notice.

// addDeprecatedProfileFlag keeps the old --profile/-p flag of cmd (and of
// its subcommands when persistent).
func addDeprecatedProfileFlag(g *globalOptions, cmd *cobra.Command, persistent bool, into *string) {
	fs := cmd.Flags()
	if persistent {
		fs = cmd.PersistentFlags()
	}
	fs.StringVarP(into, "profile", "p", "", "deprecated: give PROFILE as the first argument")
	_ = fs.MarkHidden("profile")
	_ = cmd.RegisterFlagCompletionFunc("profile", g.completeProfiles)
}

// profileOf returns the profile named by the positional argument, else by
// the deprecated flag (with its notice); both naming different profiles is
// a usage error. usage is the rest of the command line, for the notice.
func (g *globalOptions) profileOf(cmd *cobra.Command, positional, flagValue, usage string) (string, error) {
	f := cmd.Flags().Lookup("profile")
	if f == nil || !f.Changed {
		return positional, nil
	}
	if positional != "" && positional != flagValue {
		return "", usageError{fmt.Errorf("profile given twice: %q as an argument and %q with --profile", positional, flagValue)}
	}
	fmt.Fprintf(g.io.ErrOut, "lazaret: warning: --profile is deprecated; use `%s PROFILE%s`\n", cmd.CommandPath(), usage)
	return flagValue, nil
}
