package kubecli

import (
	"errors"
	"time"

	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/execargs"
	"github.com/spf13/cobra"
)

// defaultReadyTimeout bounds the wait for a claim's sandbox: a cold pod
// pulls its image and starts gVisor.
const defaultReadyTimeout = 3 * time.Minute

func addStartFlags(cmd *cobra.Command, o *startOptions) {
	cmd.Flags().BoolVar(&o.allowUnenforced, "allow-unenforced-egress", false, "start even if the cluster is not shown to enforce the profile's egress limits (NetworkPolicy)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultReadyTimeout, "how long to wait for the sandbox to become Ready")
}

func newExecCmd(g *globals) *cobra.Command {
	var tty, detach bool
	o := startOptions{}
	cmd := &cobra.Command{
		Short: "Run a command in the cluster sandbox of this directory",
		Long: `Run a command in the sandbox of PROFILE (default "default") for the current
directory on the cluster, claiming one if needed. Standard input, output and
error are passed through the API server and lazaret exits with the
command's exit code.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			profile, command, err := g.splitProfile(cmd, args)
			if err != nil {
				return err
			}
			if o.timeout <= 0 {
				return clicore.UsageError{Err: errors.New("--timeout: must be positive")}
			}
			if detach && !tty {
				return errDetachNeedsTTY
			}
			if detach && !clicore.Kept() {
				return g.keptSession(cmd.Context(), sessionRequest{profile: profile, tty: true, command: command}, true)
			}
			return g.runSession(cmd.Context(), sessionRequest{profile: profile, tty: tty, command: command, start: o})
		},
	}
	clicore.Verb("exec", cmd)
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command under a terminal (for interactive programs)")
	cmd.Flags().BoolVar(&detach, "detach", false, "with -t: start the command detached and print its session id (`"+invocation+" attach` takes it)")
	addStartFlags(cmd, &o)
	return cmd
}

// splitProfile separates the optional PROFILE from the command
// (execargs.Split, as the local CLI does); a first word is a profile only
// if it names a configured one.
func (g *globals) splitProfile(cmd *cobra.Command, args []string) (string, []string, error) {
	profile, command, err := execargs.Split(cmd, args, execargs.KnownProfile(g.loadConfig))
	if err != nil {
		return "", nil, clicore.UsageError{Err: err}
	}
	return profile, command, nil
}

func newShellCmd(g *globals) *cobra.Command {
	o := startOptions{}
	var detach bool
	cmd := &cobra.Command{
		Short: "Open an interactive shell in the cluster sandbox of this directory",
		Long: `Open an interactive shell (bash if the image has it, else sh) in the cluster
sandbox of PROFILE (default "default") for the current directory, claiming
one if needed.

On a terminal the shell is kept by a session keeper on this machine: the
detach keys ([session] detach_keys, default ctrl-\ then d) leave it
running, and so does closing the terminal unless [session] on_close =
"end"; "lazaret --backend kubernetes attach" takes it back. --detach
starts it detached.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			if o.timeout <= 0 {
				return clicore.UsageError{Err: errors.New("--timeout: must be positive")}
			}
			in, out, _ := g.io.Files()
			tty := in != nil && out != nil && isTerminal(in) && isTerminal(out)
			if (tty || detach) && !clicore.Kept() {
				return g.keptSession(cmd.Context(), sessionRequest{profile: profile, tty: true, shell: true}, detach)
			}
			return g.runSession(cmd.Context(), sessionRequest{profile: profile, tty: tty, shell: true, start: o})
		},
	}
	clicore.Verb("shell", cmd)
	addStartFlags(cmd, &o)
	cmd.Flags().BoolVar(&detach, "detach", false, "start the shell detached and print its session id (`"+invocation+" attach` takes it)")
	return cmd
}
