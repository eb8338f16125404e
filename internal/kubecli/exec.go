package kubecli

import (
	"errors"
	"time"

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
	var tty bool
	o := startOptions{}
	cmd := &cobra.Command{
		Use:   "exec [PROFILE] -- COMMAND [ARG...]",
		Short: "Run a command in the cluster sandbox of this directory",
		Long: `Run a command in the sandbox of PROFILE (default "default") for the current
directory on the cluster, claiming one if needed. Standard input, output and
error are passed through the API server and lazaret exits with the
command's exit code.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile, command, err := splitProfile(cmd, args)
			if err != nil {
				return err
			}
			if o.timeout <= 0 {
				return usageError{errors.New("--timeout: must be positive")}
			}
			return g.runSession(cmd.Context(), sessionRequest{profile: profile, tty: tty, command: command, start: o})
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command under a terminal (for interactive programs)")
	addStartFlags(cmd, &o)
	return cmd
}

// splitProfile separates the optional PROFILE from the command: "--"
// first (or no "--" at all) means no profile; "PROFILE --" names one.
// Flags stop at the first argument (SetInterspersed(false)), so the
// command's own flags are never lazaret's and a "--" after PROFILE stays
// in args.
func splitProfile(cmd *cobra.Command, args []string) (string, []string, error) {
	if cmd.ArgsLenAtDash() == 0 {
		if len(args) == 0 {
			return "", nil, usageError{errors.New("exec: no command after --")}
		}
		return "", args, nil
	}
	if len(args) >= 2 && args[1] == "--" {
		if len(args) == 2 {
			return "", nil, usageError{errors.New("exec: no command after --")}
		}
		return args[0], args[2:], nil
	}
	return "", args, nil
}

func newShellCmd(g *globals) *cobra.Command {
	o := startOptions{}
	cmd := &cobra.Command{
		Use:   "shell [PROFILE]",
		Short: "Open an interactive shell in the cluster sandbox of this directory",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			profile := ""
			if len(args) == 1 {
				profile = args[0]
			}
			if o.timeout <= 0 {
				return usageError{errors.New("--timeout: must be positive")}
			}
			in, out, _ := g.files()
			tty := in != nil && out != nil && isTerminal(in) && isTerminal(out)
			return g.runSession(cmd.Context(), sessionRequest{profile: profile, tty: tty, shell: true, start: o})
		},
	}
	addStartFlags(cmd, &o)
	return cmd
}
