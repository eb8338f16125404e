package escclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/lazaret-dev/lazaret/internal/engine/trust"
	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// RelayVerb starts the escalation relay of a Kubernetes session
// (`lazaret-escalate-go __relay DIR`, run by lazaret-kube through the API
// server's exec): it listens on DIR/sock, writes the TLS bundle lazaret-kube
// sends into DIR/tls, and carries each connection to its socket over its
// stdin and stdout (internal/wire/escrelay). It holds nothing secret of a
// session: the connections are mutual TLS end to end and the requests are
// signed by the session's signer, so the agent can kill or replace it and
// only deny service.
const RelayVerb = escrelay.Verb

// relay is the sandbox's end of a relay stream.
type relay struct {
	wmu sync.Mutex
	w   io.Writer

	mu    sync.Mutex
	conns map[uint32]chan []byte
	next  uint32
}

func (r *relay) send(f escrelay.Frame) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return escrelay.Write(r.w, f)
}

// RelayMain runs the relay for DIR until its stdin ends.
func RelayMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "lazaret-escalate: relay: "+format+"\n", a...) }
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		logf("usage: lazaret-escalate-go %s DIR (started by lazaret-kube)", RelayVerb)
		return ExitUsage
	}
	dir := args[0]
	r := &relay{w: stdout, conns: map[uint32]chan []byte{}}
	first, err := escrelay.Read(stdin)
	if err != nil || first.Type != escrelay.Bundle {
		logf("no TLS bundle: %v", err)
		return ExitFailure
	}
	ln, err := r.setup(dir, first.Payload)
	if err != nil {
		logf("%v", err)
		return ExitFailure
	}
	defer os.RemoveAll(dir)
	defer ln.Close()
	go r.acceptLoop(ln, logf)
	if err := r.send(escrelay.Frame{Type: escrelay.Ready}); err != nil {
		return ExitFailure
	}
	if err := r.readLoop(stdin, dir); err != nil {
		logf("%v", err)
		return ExitFailure
	}
	return 0
}

// setup makes DIR (0700) with the TLS bundle and the listening socket.
func (r *relay) setup(dir string, bundle []byte) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Join(dir, escrelay.TLSDir), 0o700); err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	if err := writeBundle(dir, bundle); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, escrelay.Socket)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("session socket: %w", err)
	}
	return ln, nil
}

// writeBundle replaces DIR/tls's bundle atomically.
func writeBundle(dir string, bundle []byte) error {
	tmp := filepath.Join(dir, escrelay.TLSDir, "."+trust.BundleFile+".tmp")
	if err := os.WriteFile(tmp, bundle, 0o600); err != nil {
		return fmt.Errorf("TLS bundle: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, escrelay.TLSDir, trust.BundleFile)); err != nil {
		return fmt.Errorf("TLS bundle: %w", err)
	}
	return nil
}

// readLoop hands the host's frames to their connections until stdin ends.
func (r *relay) readLoop(stdin io.Reader, dir string) error {
	for {
		f, err := escrelay.Read(stdin)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch f.Type {
		case escrelay.Bundle:
			if err := writeBundle(dir, f.Payload); err != nil {
				return err
			}
		case escrelay.Data:
			r.mu.Lock()
			ch, ok := r.conns[f.ID]
			if ok {
				select {
				case ch <- f.Payload:
				default: // a client that does not read loses its connection
					delete(r.conns, f.ID)
					close(ch)
				}
			}
			r.mu.Unlock()
		case escrelay.Close:
			r.forget(f.ID)
		}
	}
}

// forget closes connection id's queue; its writer then closes it.
func (r *relay) forget(id uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.conns[id]
	if ok {
		delete(r.conns, id)
		close(ch)
	}
	return ok
}

// queueLen bounds the frames waiting for one client.
const queueLen = 256

func (r *relay) acceptLoop(ln net.Listener, logf func(string, ...any)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if len(r.conns) >= escrelay.MaxConns {
			r.mu.Unlock()
			logf("too many connections, refusing one")
			c.Close()
			continue
		}
		r.next++
		id := r.next
		ch := make(chan []byte, queueLen)
		r.conns[id] = ch
		r.mu.Unlock()
		if r.send(escrelay.Frame{Type: escrelay.Open, ID: id}) != nil {
			c.Close()
			return
		}
		go r.write(c, ch)
		go r.read(c, id)
	}
}

// write copies the host's bytes to the client, then closes it.
func (r *relay) write(c net.Conn, ch chan []byte) {
	for p := range ch {
		if _, err := c.Write(p); err != nil {
			break
		}
	}
	c.Close()
}

// read sends the client's bytes to the host, and a Close at its end.
func (r *relay) read(c net.Conn, id uint32) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && r.send(escrelay.Frame{Type: escrelay.Data, ID: id, Payload: buf[:n]}) != nil {
			return
		}
		if err != nil {
			break
		}
	}
	if r.forget(id) {
		_ = r.send(escrelay.Frame{Type: escrelay.Close, ID: id})
	}
}
