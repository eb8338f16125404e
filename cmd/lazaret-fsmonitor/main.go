// Command lazaret-fsmonitor is the Git Sentry's file system monitor inside
// the Agent Sandbox (branch mode only). `lazaret-fsmonitor daemon` watches
// /workspace with inotify and answers on a UNIX socket; git runs
// `lazaret-fsmonitor 2 <token>` as its core.fsmonitor hook (protocol 2)
// and gets the paths changed since that token, or "/" (check everything)
// whenever the daemon cannot vouch for the whole tree.
// See internal/insandbox/fsmonitor and docs/GITSENTRY.md.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/insandbox/fsmonitor"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "daemon" {
		os.Exit(daemon(os.Args[2:]))
	}
	socket := os.Getenv("LAZARET_FSMONITOR_SOCKET")
	if socket == "" {
		socket = fsmonitor.DefaultSocket
	}
	os.Exit(fsmonitor.Hook(os.Args[1:], socket, os.Stdout, os.Stderr))
}

func daemon(args []string) int {
	fs := flag.NewFlagSet("lazaret-fsmonitor daemon", flag.ContinueOnError)
	root := fs.String("root", fsmonitor.DefaultRoot, "work tree to watch")
	socket := fs.String("socket", fsmonitor.DefaultSocket, "UNIX socket to answer on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	d, err := fsmonitor.New(*root)
	if err != nil {
		logf("lazaret-fsmonitor: %v", err)
		return 1
	}
	d.Logf = logf
	// Listen only once every directory is watched: until then the hook
	// cannot connect and answers "/".
	ln, err := fsmonitor.Listen(*socket)
	if err != nil {
		logf("lazaret-fsmonitor: %v", err)
		return 1
	}
	go d.Run()
	err = d.Serve(ln)
	logf("lazaret-fsmonitor: %v", err)
	return 1
}
