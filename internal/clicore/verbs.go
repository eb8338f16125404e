package clicore

import (
	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/execargs"
)

// VerbSyntax is how a verb both backends have is written: its usage line
// and the arguments it takes. Each backend gives it its own help and run
// (the cluster's status shows a claim, the local one a container).
type VerbSyntax struct {
	Use  string
	Args cobra.PositionalArgs
}

// Verbs are the verbs both backends implement themselves, one syntax for
// both (`doctor` differs on purpose: the cluster's takes a profile, whose
// pod resources it checks).
var Verbs = map[string]VerbSyntax{
	"exec":   {Use: "exec [PROFILE] [--] COMMAND [ARG...]", Args: execargs.Args},
	"shell":  {Use: "shell [PROFILE]", Args: cobra.MaximumNArgs(1)},
	"status": {Use: "status [PROFILE]", Args: cobra.MaximumNArgs(1)},
	"ps":     {Use: "ps", Args: cobra.NoArgs},
	"stop":   {Use: "stop [PROFILE]", Args: cobra.MaximumNArgs(1)},
	"state":  {Use: "state [PROFILE]", Args: cobra.MaximumNArgs(1)},
	"attach": {Use: "attach [PROFILE] [SESSION]", Args: cobra.MaximumNArgs(2)},
}

// Verb gives cmd the syntax of the shared verb name and returns it.
func Verb(name string, cmd *cobra.Command) *cobra.Command {
	v, ok := Verbs[name]
	if !ok {
		panic("clicore: no shared verb " + name)
	}
	cmd.Use, cmd.Args = v.Use, v.Args
	return cmd
}
