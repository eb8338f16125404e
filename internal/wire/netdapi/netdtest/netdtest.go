// Package netdtest is the tests' stand-in for lazaret-netd's control
// socket: it answers every request OK and records what it was asked.
package netdtest

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/netpolicy"
	"github.com/lazaret-dev/lazaret/internal/wire/netdapi"
)

// Server is a fake netd control socket.
type Server struct {
	mu     sync.Mutex
	reqs   []netdapi.Request
	policy netpolicy.Policy
}

// SetPolicy sets the policy every later status answer reports.
func (s *Server) SetPolicy(p netpolicy.Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p
}

// Serve listens on path (a fresh socket under t.TempDir when "") until t
// ends and returns the server and a client of it.
func Serve(t *testing.T, path string) (*Server, *netdapi.Client) {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "netd.sock")
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := &Server{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			var r netdapi.Request
			if sc := bufio.NewScanner(c); sc.Scan() && json.Unmarshal(sc.Bytes(), &r) == nil {
				s.mu.Lock()
				s.reqs = append(s.reqs, r)
				s.mu.Unlock()
			}
			s.mu.Lock()
			st := &netdapi.Status{Policy: s.policy}
			s.mu.Unlock()
			json.NewEncoder(c).Encode(netdapi.Response{OK: true, Status: st})
			c.Close()
		}
	}()
	return s, &netdapi.Client{Socket: path}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []netdapi.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}
