package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/sandbox"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

type syncComp struct {
	calls int
	err   error
}

func (s *syncComp) Name() string                                         { return "gitsentry" }
func (s *syncComp) Prepare(context.Context, *podman.ContainerSpec) error { return nil }
func (s *syncComp) Started(context.Context, string) error                { return nil }
func (s *syncComp) Close(context.Context) error                          { return nil }
func (s *syncComp) SyncNow(context.Context) error                        { s.calls++; return s.err }

type plainComp struct{ syncComp }

func (plainComp) SyncNow() {} // not the Syncer method: not asked

// TestHandleGitSync: the request runs the sync of the component that has
// one, answers its failure as an internal error, and waits for the start.
func TestHandleGitSync(t *testing.T) {
	ok, other := &syncComp{}, &plainComp{}
	c := &coordinator{ready: make(chan struct{}), comps: []sandbox.Component{other, ok}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.handleGitSync(ctx, &ctlserver.Request{Request: ctl.Request{Type: ctl.TypeGitSync}}); !errors.Is(err, context.Canceled) || ok.calls != 0 {
		t.Fatalf("before the start: %v, %d syncs", err, ok.calls)
	}
	close(c.ready)
	if _, err := c.handleGitSync(context.Background(), &ctlserver.Request{Request: ctl.Request{Type: ctl.TypeGitSync}}); err != nil || ok.calls != 1 {
		t.Fatalf("handleGitSync: %v, %d syncs", err, ok.calls)
	}
	ok.err = errors.New("podman exec failed")
	if _, err := c.handleGitSync(context.Background(), &ctlserver.Request{Request: ctl.Request{Type: ctl.TypeGitSync}}); !errors.Is(err, ctl.ErrInternal) {
		t.Fatalf("failing sync answered %v", err)
	}
}
