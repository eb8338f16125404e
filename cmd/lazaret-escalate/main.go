// Command lazaret-escalate is the Escalation Client that runs inside the
// Agent Sandbox: it asks the coordinator, over mutual TLS on the escalation
// socket, to run one command on the host, prints the command's output and
// exits with its exit code (126 when denied).
package main

import (
	"os"

	"github.com/lazaret-dev/lazaret/cmd/lazaret-escalate/client"
)

func main() {
	os.Exit(client.Main(os.Args, os.Getenv, os.Stdout, os.Stderr))
}
