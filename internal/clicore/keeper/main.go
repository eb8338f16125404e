package keeper

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/unixsock"
)

// validID is a keeper id as Spawn makes them: it names files.
var validID = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

// parseArgs reads the keeper's command line (Spawn writes it).
func parseArgs(args []string) (Options, error) {
	var o Options
	var rows, cols uint
	var onClose string
	fs := flag.NewFlagSet(Verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.ID, "id", "", "")
	fs.StringVar(&o.Dir, "dir", "", "")
	fs.StringVar(&o.Profile, "profile", "", "")
	fs.StringVar(&o.Workspace, "workspace", "", "")
	fs.StringVar(&onClose, "on-close", "detach", "")
	fs.StringVar(&o.Backend, "backend", "", "")
	fs.BoolVar(&o.Detached, "detached", false, "")
	fs.UintVar(&rows, "rows", 24, "")
	fs.UintVar(&cols, "cols", 80, "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Inner = fs.Args()
	o.OnCloseEnd = onClose == "end"
	s, err := decodeSize(encodeSize(Size{Rows: uint16(min(rows, maxSide+1)), Cols: uint16(min(cols, maxSide+1))}))
	switch {
	case err != nil:
		return o, err
	case !validID.MatchString(o.ID):
		return o, fmt.Errorf("invalid --id %q", o.ID)
	case !filepath.IsAbs(o.Dir):
		return o, fmt.Errorf("--dir %q is not absolute", o.Dir)
	case len(o.Inner) == 0:
		return o, fmt.Errorf("no command")
	}
	o.Size = s
	return o, nil
}

// Main is the keeper process (`lazaret __keep …`), started by Spawn with
// the spawner's pipe on descriptor 3 and /dev/null as its standard
// streams. Its socket and info file are removed on every way out.
func Main(args []string) int {
	o, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazaret __keep:", err)
		return 2
	}
	logf, err := os.OpenFile(LogPath(o.Dir), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lazaret __keep:", err)
		return 1
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, nil)).With("keeper", o.ID, "pid", os.Getpid())
	k := &keeper{o: o, log: log, ready: os.NewFile(3, "ready"),
		info: Info{ID: o.ID, Profile: o.Profile, Workspace: o.Workspace, Backend: o.Backend, Command: o.Inner, PID: os.Getpid()}}
	ln, err := unixsock.Listen(socketPath(o.Dir, o.ID))
	if err != nil {
		log.Error("listening", "err", err)
		return 1
	}
	cleanup := func() {
		_ = os.Remove(socketPath(o.Dir, o.ID))
		_ = os.Remove(infoPath(o.Dir, o.ID))
	}
	defer cleanup()
	k.saveInfo()
	go k.onSignals(cleanup)
	code, err := k.run(ln)
	ln.Close()
	if err != nil {
		log.Error("the session did not start", "err", err)
		return 1
	}
	return code
}

// onSignals ends the session as a hang-up would on SIGTERM, SIGHUP or
// SIGINT (the keeper then exits once the inner did); before the session
// started, the keeper leaves at once. A session that goes on without this
// machine (another backend's: a cluster session, in its pod) is not ended
// by SIGTERM, the signal of a shutdown: its CLI gets it and leaves the
// session running there, to be taken back (docs/KUBERNETES.md).
func (k *keeper) onSignals(cleanup func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	for sig := range sigs {
		if !k.onSignal(sig) {
			cleanup()
			os.Exit(1)
		}
	}
}

// onSignal handles one signal; false when no session runs yet (the
// keeper then leaves at once).
func (k *keeper) onSignal(sig os.Signal) bool {
	if sig == syscall.SIGTERM && k.o.Backend != "" && k.leave() {
		k.log.Info("signal: the session's CLI leaves it running", "signal", sig.String(), "backend", k.o.Backend)
		return true
	}
	k.log.Info("signal: ending the session", "signal", sig.String())
	return k.hangUp()
}

// leaveWait bounds the wait for the inner to leave on SIGTERM; the
// session is then hung up.
const leaveWait = 10 * time.Second

// leave passes SIGTERM on to the inner; false when no session runs yet.
func (k *keeper) leave() bool {
	k.mu.Lock()
	p := k.inner
	k.mu.Unlock()
	if p == nil || p.Signal(syscall.SIGTERM) != nil {
		return false
	}
	time.AfterFunc(leaveWait, func() {
		k.mu.Lock()
		ended := k.ended
		k.mu.Unlock()
		if !ended {
			k.log.Warn("the session's CLI did not leave: ending the session")
			k.hangUp()
		}
	})
	return true
}
