// Command lazaret-escalate is the Escalation Client that runs inside the
// Agent Sandbox: it asks the coordinator, over mutual TLS on the escalation
// socket, to run one command on the host, prints the command's output and
// exits with its exit code (126 when denied).
//
// It is installed as lazaret-escalate-go. In the sandbox it runs as the
// escalation broker (`lazaret-escalate-go __broker SOCKET`, started by the
// coordinator), which serves the small C front end that is the sandbox's
// lazaret-escalate (cmd/lazaret-escalate); the front end execs it
// directly when the broker cannot be reached. Every `lazaret shell`/`exec`
// starts under the C session holder, which starts this program as the
// session's signer (`lazaret-escalate-go __signer PID`) on the session's
// first request: it keeps that session's delegated key and serves the
// front end of that session's processes only (client/holder.go).
//
// Its start-up is on the measured round trip (docs/PERFORMANCE.md, Host
// Escalation), and under gVisor every system call of the Go runtime's own
// start-up costs a trap into the Sentry. Two of them are optional and off:
// naming anonymous mappings (one prctl per mapping) and reading the cgroup
// files to derive GOMAXPROCS (a short-lived client gains nothing from it).
//
//go:debug decoratemappings=0
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"os"

	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
	"github.com/lazaret-dev/lazaret/internal/insandbox/podkeep"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// init makes a session's signer non-dumpable before anything else of the
// program runs: it is about to read the session's delegated key.
func init() {
	if len(os.Args) > 1 && os.Args[1] == escclient.SignerVerb {
		_ = escclient.SetNonDumpable()
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == escclient.SignerVerb {
		os.Exit(escclient.SignerMain(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == escrelay.InstallVerb {
		os.Exit(escclient.InstallMain(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == podkeep.Verb {
		os.Exit(podkeep.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == escclient.RelayVerb {
		os.Exit(escclient.RelayMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == escclient.RelayServeVerb {
		os.Exit(escclient.RelayServeMain(os.Args[2:], os.Stderr))
	}
	if len(os.Args) == 3 && os.Args[1] == escclient.OOMKillVerb && os.Args[2] == escclient.OOMKillServe {
		os.Exit(escclient.OOMKillServeMain("/proc", os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) == 2 && os.Args[1] == escclient.OOMKillVerb {
		os.Exit(escclient.OOMKillMain("/proc", os.Stdout, os.Stderr))
	}
	if len(os.Args) == 3 && os.Args[1] == escclient.BrokerVerb {
		os.Exit(escclient.BrokerMain(os.Args[2], os.Stderr))
	}
	os.Exit(escclient.Main(os.Args, os.Getenv, os.Stdout, os.Stderr))
}
