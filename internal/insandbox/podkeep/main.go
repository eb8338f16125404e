// Package podkeep is a cluster session's terminal keeper in the pod
// (`lazaret-escalate-go __podkeep …`): a daemon holds the session's
// command on a PTY and keeps its last output, so the command goes on
// when lazaret-kube's exec stream dies (the laptop closes), and
// lazaret-kube links again later and gets what it missed. The protocol,
// and lazaret-kube's side, are internal/wire/podkeep.
//
//	__podkeep run DIR -- ARGV...  start a keeper in DIR, then attach
//	__podkeep attach DIR           link the exec's stdin/stdout to it
//	__podkeep serve DIR -- ARGV... the keeper itself (run starts it)
//
// The keeper runs as the agent and its socket is the agent's to reach:
// the agent may type into, resize, hang up or read that terminal, which
// it controls anyway, or kill the keeper. The keeper must only ever be
// able to deny service or garble the agent's own terminal: lazaret-kube
// parses its frames as untrusted, and never draws a prompt or an
// approval through it (lazaret-kube draws them on the laptop).
package podkeep

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	wire "github.com/lazaret-dev/lazaret/internal/wire/podkeep"
)

// Verb is the hidden verb (internal/wire/podkeep's).
const Verb = wire.Verb

// sockName is the keeper's socket in DIR.
const sockName = "sock"

// startWait bounds the wait for a new keeper's socket.
const startWait = 10 * time.Second

// Main runs `__podkeep run|attach|serve` (args: those after the verb)
// and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 2 && args[0] == "attach":
		return Attach(args[1], stdin, stdout, stderr)
	case len(args) > 3 && args[0] == "run" && args[2] == "--":
		return Run(args[1], args[3:], stdin, stdout, stderr)
	case len(args) > 3 && args[0] == "serve" && args[2] == "--":
		return serve(args[1], args[3:], stderr)
	}
	fmt.Fprintf(stderr, "usage: %s run DIR -- COMMAND... | attach DIR\n", Verb)
	return 2
}

// Attach links stdin and stdout to the keeper in dir, byte for byte,
// until either ends; wire.ExitNoSession when dir holds no keeper.
func Attach(dir string, stdin io.Reader, stdout, stderr io.Writer) int {
	conn, err := net.Dial("unix", filepath.Join(dir, sockName))
	if err != nil {
		fmt.Fprintf(stderr, "lazaret: no terminal keeper in %s: %v\n", dir, err)
		return wire.ExitNoSession
	}
	bridge(conn, stdin, stdout)
	return 0
}

// bridge copies both ways until one way ends.
func bridge(conn net.Conn, in io.Reader, out io.Writer) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(conn, in)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(out, conn)
		done <- struct{}{}
	}()
	<-done
	_ = conn.Close()
}

// Run starts a keeper of argv in dir and attaches to it.
func Run(dir string, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	conn, err := start(dir, argv)
	if err != nil {
		fmt.Fprintf(stderr, "lazaret: terminal keeper in %s: %v\n", dir, err)
		return 1
	}
	bridge(conn, stdin, stdout)
	return 0
}

// start makes dir, starts the keeper daemon (a new session, stdio on
// /dev/null, nothing else inherited, not waited for) and returns a
// connection to it once it listens.
func start(dir string, argv []string) (net.Conn, error) {
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{Verb, "serve", dir, "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	_ = fdsafe.MarkInherited() // the daemon outlives the exec by hours: none of its descriptors
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	died := make(chan error, 1)
	go func() { died <- cmd.Wait() }() // reaps it only if it dies early
	sock := filepath.Join(dir, sockName)
	deadline := time.After(startWait)
	for {
		if conn, err := net.Dial("unix", sock); err == nil {
			return conn, nil
		}
		select {
		case err := <-died:
			return nil, fmt.Errorf("the keeper exited before listening: %v", err)
		case <-deadline:
			return nil, errors.New("the keeper did not listen in time")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// prepareDir makes dir (0700) for a new keeper: refused when a keeper
// listens there already; a dead one's socket is removed.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	sock := filepath.Join(dir, sockName)
	if conn, err := net.Dial("unix", sock); err == nil {
		conn.Close()
		return errors.New("a keeper already runs there")
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// serve is the keeper daemon: it listens in dir, runs argv and, once
// the session is over, removes dir.
func serve(dir string, argv []string, stderr io.Writer) int {
	// Hang-ups and broken pipes are not the daemon's end. Caught rather
	// than ignored: an ignored signal stays ignored in the command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGPIPE)
	ln, err := net.Listen("unix", filepath.Join(dir, sockName))
	if err != nil {
		fmt.Fprintf(stderr, "lazaret: %v\n", err)
		return 1
	}
	k := &Keeper{Argv: argv}
	k.Start()
	k.Run(ln)
	_ = os.RemoveAll(dir)
	return 0
}
