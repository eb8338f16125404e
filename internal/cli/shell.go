package cli

import (
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/spf13/cobra"
)

func newShellCmd(g *globalOptions) *cobra.Command {
	var choices startChoices
	var detach bool
	cmd := &cobra.Command{
		Short: "Open an interactive shell in the sandbox of this directory",
		Long: `Open an interactive shell (bash if the image has it, else sh) in the sandbox of
PROFILE (default "default") for the current directory, starting the sandbox
if needed. Several shells and commands can share one sandbox; it stops when
the last of them ends.

On a terminal the shell is kept by a session keeper: the detach keys
([session] detach_keys, default ctrl-\ then d) leave it running, and so
does closing the terminal unless [session] on_close = "end"; "lazaret
attach" takes it back. --detach starts it detached.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			stdin, stdout, _ := g.files()
			// A shell gets a terminal when lazaret has one; piped into, it
			// reads commands from stdin like sh -s.
			tty := isTerminal(stdin) && isTerminal(stdout)
			if (tty || detach) && !kept() {
				return keptSession(cmd.Context(), g, sessionRequest{profile: profile, tty: true, shell: true, choices: choices}, detach)
			}
			return runSession(cmd.Context(), g, sessionRequest{profile: profile, tty: tty, shell: true, choices: choices})
		},
	}
	clicore.Verb("shell", cmd)
	choices.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&detach, "detach", false, "start the shell detached and print its session id (`lazaret attach` takes it)")
	return cmd
}
