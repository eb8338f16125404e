package limits

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/runscexec"
	"github.com/lazaret-dev/lazaret/internal/visible"
	"github.com/lazaret-dev/lazaret/internal/wire/escprompt"
)

// OOMKillVerb is the in-sandbox Go client's OOM killer
// (escclient.OOMKillVerb; the two must agree).
const OOMKillVerb = "__oomkill"

// oomKillServe is the verb's resident mode (client.OOMKillServe).
const oomKillServe = "--serve"

// killTimeout bounds one kill (a runsc exec takes about 35 ms here).
const killTimeout = 10 * time.Second

// maxKillOutput bounds what is read of the killer's output.
const maxKillOutput = 512

// killed is what the in-sandbox killer reported. Every field came from
// the sandbox: Comm is escaped for display, the numbers are only shown.
type killed struct {
	None bool // nothing to kill
	PID  int
	RSS  int64 // -1: unknown (the process was busy allocating)
	Comm string
}

// parseKill reads the killer's one line ("killed PID RSS COMM" or "none")
// strictly: anything else is an error.
func parseKill(out []byte) (killed, error) {
	line, rest, _ := bytes.Cut(out, []byte{'\n'})
	if len(bytes.TrimSpace(rest)) != 0 || len(line) > 200 {
		return killed{}, fmt.Errorf("unexpected output from the sandbox's OOM killer")
	}
	if string(line) == "none" {
		return killed{None: true}, nil
	}
	f := strings.SplitN(string(line), " ", 4)
	if len(f) != 4 || f[0] != "killed" {
		return killed{}, fmt.Errorf("unexpected output from the sandbox's OOM killer")
	}
	pid, err1 := strconv.Atoi(f[1])
	rss, err2 := int64(-1), error(nil)
	if f[2] != "?" {
		rss, err2 = strconv.ParseInt(f[2], 10, 64)
		if rss < 0 {
			err2 = strconv.ErrRange
		}
	}
	if err1 != nil || err2 != nil || pid <= 1 || rss < -1 || f[3] == "" || len(f[3]) > 64 {
		return killed{}, fmt.Errorf("unexpected output from the sandbox's OOM killer")
	}
	return killed{PID: pid, RSS: rss, Comm: visible.Line(f[3])}, nil
}

// execKiller runs the OOM killer in the sandbox: a resident killer
// started once with runsc exec (the session's own exec path) and asked
// through its standard input, so that a kill costs a few milliseconds;
// when that one is gone (the agent may kill it), a one-shot runsc exec,
// or podman exec when runsc's state cannot be read.
type execKiller struct {
	pm        *podman.Client
	runsc     string
	flags     []string
	runscRoot string
	id        string // the container's full ID
	name      string
	log       *slog.Logger

	mu       sync.Mutex
	resident *resident
	closed   bool
}

// residentWait bounds the resident killer's answer.
const residentWait = 2 * time.Second

// resident is the resident killer: its runsc exec, the write end of its
// standard input, the read end of its output.
type resident struct {
	e      *runscexec.Exec
	req    *os.File
	in     *os.File // req's read end (runscexec's copy reads it)
	out    *os.File // resp's write end (runscexec's copy writes it)
	resp   *os.File
	buf    *bufio.Reader
	exited chan struct{}
}

// start starts the resident killer (once the sandbox runs); a failure
// leaves the one-shot path.
func (k *execKiller) start(ctx context.Context) {
	if k.runsc == "" {
		return
	}
	c, err := runscexec.Load(k.runscRoot, k.id)
	if err != nil {
		k.log.Info("limits: no resident OOM killer", "err", err)
		return
	}
	r, err := startResident(context.WithoutCancel(ctx), c, k.runsc, k.flags)
	if err != nil {
		k.log.Warn("limits: no resident OOM killer", "err", err)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		r.stop()
		return
	}
	k.resident = r
}

func startResident(ctx context.Context, c *runscexec.Container, runsc string, flags []string) (*resident, error) {
	e, err := c.Command(ctx, runsc, flags, runscexec.Options{Command: []string{escprompt.SandboxGoClient, OOMKillVerb, oomKillServe}}, nil)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, errors.Join(err, inR.Close(), inW.Close(), outR.Close(), outW.Close())
	}
	defer null.Close()
	// inR and outW stay open while the resident runs: runscexec copies
	// from inR into the command's stdin pipe, and from its stdout pipe
	// into outW.
	if _, err := e.Wire(inR, outW, null, false); err != nil {
		return nil, errors.Join(err, inR.Close(), inW.Close(), outR.Close(), outW.Close())
	}
	if err := e.Cmd.Start(); err != nil {
		e.Started()
		e.Done()
		return nil, errors.Join(err, inR.Close(), inW.Close(), outR.Close(), outW.Close())
	}
	e.Started()
	r := &resident{e: e, req: inW, in: inR, out: outW, resp: outR, buf: bufio.NewReaderSize(outR, maxKillOutput), exited: make(chan struct{})}
	go func() {
		_ = e.Cmd.Wait()
		e.Done()
		close(r.exited)
	}()
	return r, nil
}

// ask asks the resident killer for one kill.
func (r *resident) ask() (killed, error) {
	if _, err := r.req.Write([]byte{'k'}); err != nil {
		return killed{}, err
	}
	if err := r.resp.SetReadDeadline(time.Now().Add(residentWait)); err != nil {
		return killed{}, err
	}
	line, err := r.buf.ReadSlice('\n')
	if err != nil {
		return killed{}, fmt.Errorf("the resident OOM killer: %w", err)
	}
	return parseKill(line)
}

// stop ends the resident killer: end of input, then its runsc exec.
func (r *resident) stop() {
	r.req.Close()
	select {
	case <-r.exited:
	case <-time.After(time.Second):
		_ = r.e.Cmd.Process.Kill()
		<-r.exited
	}
	r.in.Close()
	r.out.Close()
	r.resp.Close()
}

func (k *execKiller) kill(ctx context.Context) (killed, error) {
	k.mu.Lock()
	r := k.resident
	k.mu.Unlock()
	if r != nil {
		res, err := r.ask()
		if err == nil {
			return res, nil
		}
		k.log.Warn("limits: the resident OOM killer failed; running one", "err", err)
		k.mu.Lock()
		if k.resident == r {
			k.resident = nil
		}
		k.mu.Unlock()
		go r.stop()
		defer func() { go k.start(ctx) }()
	}
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	argv := []string{escprompt.SandboxGoClient, OOMKillVerb}
	var out []byte
	c, err := runscexec.Load(k.runscRoot, k.id)
	if err == nil && k.runsc != "" {
		out, err = runscOutput(ctx, c, k.runsc, k.flags, argv)
	} else {
		out, err = k.pm.ExecOutput(ctx, k.name, argv...)
	}
	if err != nil {
		return killed{}, err
	}
	return parseKill(out)
}

// close stops the resident killer.
func (k *execKiller) close() {
	k.mu.Lock()
	r := k.resident
	k.resident, k.closed = nil, true
	k.mu.Unlock()
	if r != nil {
		r.stop()
	}
}

// runscOutput runs argv with runsc exec and returns its bounded stdout.
func runscOutput(ctx context.Context, c *runscexec.Container, runsc string, flags, argv []string) ([]byte, error) {
	e, err := c.Command(ctx, runsc, flags, runscexec.Options{Command: argv}, nil)
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		w.Close()
		return nil, err
	}
	defer null.Close()
	if _, err := e.Wire(nil, w, null, false); err != nil {
		w.Close()
		return nil, err
	}
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, maxKillOutput))
		_, _ = io.Copy(io.Discard, r)
		done <- b
	}()
	err = e.Cmd.Start()
	e.Started()
	if err != nil {
		e.Done()
		w.Close()
		<-done
		return nil, err
	}
	err = e.Cmd.Wait()
	e.Done()
	w.Close()
	out := <-done
	if err != nil {
		code, msg := e.Result(e.Cmd.ProcessState.ExitCode())
		return nil, fmt.Errorf("runsc exec of the OOM killer: exit %d: %s", code, msg)
	}
	return out, nil
}
