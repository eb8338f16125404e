package escclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
	"github.com/lazaret-dev/lazaret/internal/capped"
	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/fdsafe"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// RelayVerb starts the escalation relay's bridge of a Kubernetes session
// (`lazaret-escalate-go __relay DIR`, run by lazaret-kube through the API
// server's exec): it joins its stdin and stdout to the relay daemon's link
// socket DIR/link, first starting the daemon (RelayServeVerb) if none
// listens. The daemon listens on DIR/sock, writes the TLS bundle
// lazaret-kube sends into DIR/tls and carries each connection to its
// socket over the link (internal/wire/escrelay); it outlives the exec, so
// a connection waits in it while lazaret-kube is away (a laptop asleep)
// and resumes when it links again. Neither holds anything secret of a
// session: the connections are mutual TLS end to end and the requests are
// signed by the session's signer, so the agent can kill or replace them
// and only deny service.
const RelayVerb = escrelay.Verb

// RelayServeVerb starts the relay daemon: `__relay-serve DIR`.
const RelayServeVerb = escrelay.ServeVerb

// Files of DIR besides the sockets.
const (
	relayLock = "lock"      // held (flock) by the one daemon of DIR
	relayLog  = "relay.log" // the daemon's stderr
)

// relayLogMax bounds what one daemon writes to its log.
const relayLogMax = 64 << 10

// relayIdle ends a daemon no host linked to for that long: lazaret-kube
// is gone (killed, its machine never back) and its session with it, as
// the terminal keeper's linger (podkeep.DefaultLinger) says of an ended
// command's.
const relayIdle = 24 * time.Hour

// bridgeDialTimeout bounds the wait for a daemon just started.
const bridgeDialTimeout = 10 * time.Second

// RelayMain runs the bridge for DIR until its stdin or the link ends.
func RelayMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "lazaret-escalate: relay: "+format+"\n", a...) }
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		logf("usage: lazaret-escalate-go %s DIR (started by lazaret-kube)", RelayVerb)
		return ExitUsage
	}
	if err := bridge(args[0], stdin, stdout, startDaemon); err != nil {
		logf("%v", err)
		return ExitFailure
	}
	return 0
}

// bridge copies stdin to the daemon's link and the link to stdout until
// either ends; start starts a daemon when none listens.
func bridge(dir string, stdin io.Reader, stdout io.Writer, start func(dir string) error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session directory: %w", err)
	}
	conn, err := net.Dial("unix", filepath.Join(dir, escrelay.LinkSocket))
	if err != nil {
		if err := start(dir); err != nil {
			return fmt.Errorf("starting the relay daemon: %w", err)
		}
		conn, err = dialLink(dir)
		if err != nil {
			return err
		}
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stdin); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stdout, conn); done <- struct{}{} }()
	<-done
	return nil
}

// dialLink waits for a daemon (this bridge's or, after a race, another's)
// to listen on DIR/link.
func dialLink(dir string) (net.Conn, error) {
	end := time.Now().Add(bridgeDialTimeout)
	for {
		conn, err := net.Dial("unix", filepath.Join(dir, escrelay.LinkSocket))
		if err == nil {
			return conn, nil
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("relay daemon: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startDaemon starts this program as DIR's daemon, in a session of its
// own (no terminal's hangup reaches it), with no descriptor of the bridge
// but its log; it is reaped if it ends first, never waited for.
func startDaemon(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	flag := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if fi, err := os.Stat(filepath.Join(dir, relayLog)); err == nil && fi.Size() > 4*relayLogMax {
		flag |= os.O_TRUNC // earlier daemons' logs: keep it bounded
	}
	logf, err := os.OpenFile(filepath.Join(dir, relayLog), flag, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	_ = fdsafe.MarkInherited() // the daemon outlives the exec by hours: none of its descriptors
	cmd := exec.Command(self, RelayServeVerb, dir)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.Dir, cmd.Env = "/", []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// RelayServeMain runs the relay daemon of DIR until the host's End.
func RelayServeMain(args []string, stderr io.Writer) int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	lw := capped.NewWriter(stderr, relayLogMax)
	logf := func(format string, a ...any) { fmt.Fprintf(lw, "lazaret-escalate: relay daemon: "+format+"\n", a...) }
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		logf("usage: lazaret-escalate-go %s DIR (started by the relay)", RelayServeVerb)
		return ExitUsage
	}
	if err := serve(args[0], relayIdle, logf); err != nil {
		logf("%v", err)
		return ExitFailure
	}
	return 0
}

// serve runs DIR's daemon unless another holds DIR's lock (then it
// returns nil at once: two bridges starting a daemon at once end with
// one), until the host's End or idle without a link.
func serve(dir string, idle time.Duration, logf func(string, ...any)) error {
	if err := os.MkdirAll(filepath.Join(dir, escrelay.TLSDir), 0o700); err != nil {
		return fmt.Errorf("session directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, relayLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil
		}
		return fmt.Errorf("lock: %w", err)
	}
	link := filepath.Join(dir, escrelay.LinkSocket)
	_ = os.Remove(link) // a dead daemon's: we hold the lock
	ln, err := net.Listen("unix", link)
	if err != nil {
		return fmt.Errorf("link socket: %w", err)
	}
	d := &daemon{dir: dir, relay: escrelay.NewRelay(), logf: logf, unlinked: time.Now()}
	go d.acceptLinks(ln)
	select {
	case <-d.relay.Ended():
	case <-d.idleFor(idle, d.relay.Ended()):
		logf("no link for %s: ending", idle)
		d.relay.Close()
	}
	ln.Close()
	d.mu.Lock()
	if d.sock != nil {
		d.sock.Close()
	}
	if d.link != nil {
		d.link.Close()
	}
	d.mu.Unlock()
	return os.RemoveAll(dir)
}

// daemon is DIR's relay daemon.
type daemon struct {
	dir   string
	relay *escrelay.Relay
	logf  func(string, ...any)

	mu   sync.Mutex
	link net.Conn     // the current bridge's
	sock net.Listener // DIR/sock, from the first bundle on
	// links counts the links running; unlinked is when the last ended.
	links    int
	unlinked time.Time
}

// linked counts a link in (+1) or out (-1).
func (d *daemon) linked(delta int) {
	d.mu.Lock()
	d.links += delta
	if d.links == 0 {
		d.unlinked = time.Now()
	}
	d.mu.Unlock()
}

// idleFor is closed once no link has run for idle (unless stop closes
// first).
func (d *daemon) idleFor(idle time.Duration, stop <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		tick := time.NewTicker(min(idle/10, time.Minute))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			d.mu.Lock()
			gone := d.links == 0 && time.Since(d.unlinked) >= idle
			d.mu.Unlock()
			if gone {
				close(out)
				return
			}
		}
	}()
	return out
}

// acceptLinks runs each bridge's link; a new one replaces the current.
func (d *daemon) acceptLinks(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		if d.link != nil {
			d.link.Close()
		}
		d.link = c
		d.mu.Unlock()
		d.linked(+1)
		go func() {
			defer d.linked(-1)
			if err := d.relay.Link(c, c, d.bundle); err != nil {
				d.logf("link: %v", err)
			}
			c.Close()
		}()
	}
}

// bundle writes the host's TLS bundle and, the first time, makes the
// session's socket listen.
func (d *daemon) bundle(b []byte) error {
	if err := writeBundle(d.dir, b); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sock != nil {
		return nil
	}
	sock := filepath.Join(d.dir, escrelay.Socket)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("session socket: %w", err)
	}
	d.sock = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if err := d.relay.Add(c); err != nil {
				d.logf("%v, refusing one", err)
			}
		}
	}()
	return nil
}

// writeBundle replaces DIR/tls's bundle atomically.
func writeBundle(dir string, bundle []byte) error {
	if err := atomicfile.Write(filepath.Join(dir, escrelay.TLSDir, trust.BundleFile), bundle, 0o600); err != nil {
		return fmt.Errorf("TLS bundle: %w", err)
	}
	return nil
}
