package keeper

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// SpawnOptions describe the keeper Spawn starts.
type SpawnOptions struct {
	// Dir is the keepers' directory (domain.KeeperDir), made private here.
	Dir                string
	Profile, Workspace string
	// Backend is written into the session's Info ("" local).
	Backend    string
	OnCloseEnd bool
	// Detached: start the session now and return once it reached its
	// coordinator (or failed); otherwise return once the keeper listens,
	// for the spawner to attach (the session starts then, at its size).
	Detached bool
	Size     Size
	// Inner is the session's CLI argv after the executable.
	Inner []string
	// Env is added to the keeper's environment, which its inner inherits.
	Env []string
}

// Started is how a spawn went.
type Started struct {
	ID, Socket string
	// Session is the session's id (detached spawns).
	Session string
	// Exited: the session ended before it started (detached spawns):
	// Code is its exit code, Output what its terminal showed.
	Exited bool
	Code   int
	Output string
}

// maxStartOutput bounds what a failed start's terminal text may be.
const maxStartOutput = 64 << 10

// Spawn starts a keeper (its own session, no terminal, standard streams
// on /dev/null, its log in LogPath) and waits for its answer on a pipe.
// A detached start can wait on anything the session's start waits on (a
// cold pod, an image); ctx's end (the user's ctrl-c, SIGTERM) sends the
// keeper SIGTERM, which ends the session it was starting.
func Spawn(ctx context.Context, o SpawnOptions) (Started, error) {
	if err := domain.EnsurePrivateDir(o.Dir); err != nil {
		return Started{}, err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return Started{}, err
	}
	st := Started{ID: hex.EncodeToString(id)}
	st.Socket = socketPath(o.Dir, st.ID)
	exe, err := os.Executable()
	if err != nil {
		return st, err
	}
	onClose := "detach"
	if o.OnCloseEnd {
		onClose = "end"
	}
	args := []string{Verb, "--id", st.ID, "--dir", o.Dir, "--profile", o.Profile, "--workspace", o.Workspace,
		"--on-close", onClose, "--backend", o.Backend, "--rows", strconv.Itoa(int(o.Size.Rows)), "--cols", strconv.Itoa(int(o.Size.Cols))}
	if o.Detached {
		args = append(args, "--detached")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return st, err
	}
	defer r.Close()
	cmd := exec.Command(exe, append(append(args, "--"), o.Inner...)...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return st, fmt.Errorf("starting the session keeper: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reaped while the spawner lives on
	type answer struct {
		st  Started
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		st, err := readAnswer(r, st, o.Dir)
		answered <- answer{st, err}
	}()
	select {
	case a := <-answered:
		return a.st, a.err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return st, fmt.Errorf("interrupted before the session started: %w", ctx.Err())
	}
}

// readAnswer reads the keeper's answer: "listening", "started ID" or
// "exited CODE" and the session's terminal text.
func readAnswer(r io.Reader, st Started, dir string) (Started, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxStartOutput), 256)
	line, err := br.ReadString('\n')
	if err != nil {
		return st, fmt.Errorf("the session keeper ended without starting the session (its log: %s)", LogPath(dir))
	}
	word, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	switch word {
	case "listening":
		return st, nil
	case LineStarted:
		st.Session = arg
		return st, nil
	case "exited":
		code, err := strconv.Atoi(arg)
		if err != nil {
			return st, fmt.Errorf("the session keeper's answer %q: %w", line, err)
		}
		rest, _ := io.ReadAll(br)
		st.Exited, st.Code, st.Output = true, code, string(rest)
		return st, nil
	}
	return st, errors.New("the session keeper's answer is not understood")
}
