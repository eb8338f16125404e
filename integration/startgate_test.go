//go:build integration

package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/startgate"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
)

// TestStartGateHoldsAFailedMount: the coordinator starts the agent's
// podman run while the State Anchor still mounts its overlays; the runsc
// shim holds the create at the start gate. When the mount fails, the
// sandbox must never run (a persistent dir would be the empty mount
// point), and the error must name the State Anchor's failure.
// Control: the same failed mount without the gate gives a running
// container whose /var is empty.
func TestStartGateHoldsAFailedMount(t *testing.T) {
	s := newSAEnv(t)
	shim := filepath.Join(binDir(t), "lazaret-runsc")
	// A changes dir that is a file: the overlay's mount fails (after
	// Prepare, in the background).
	st := statestore.Locate(s.anchor, "")
	changes, _, _ := st.OverlayPaths("/var")
	if err := os.MkdirAll(filepath.Dir(changes), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changes, []byte("not a dir"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The vault seals the root at Prepare; the test reopens it to clean up.
	t.Cleanup(func() { _ = os.Chmod(st.Root, 0o700) })

	run := func(gated bool) (string, error, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		comp := s.component(config.DefaultImage, "/var")
		defer comp.Close(ctx)
		spec := &podman.ContainerSpec{
			Name: s.container(), Image: config.DefaultImage, Runtime: shim,
			Labels:  map[string]string{domain.LabelKey: s.anchor.Hash},
			Network: "none", Command: []string{"sh", "-c", "ls -A /var | wc -l; sleep 900"},
		}
		if err := comp.Prepare(ctx, spec); err != nil {
			t.Fatalf("prepare: %v", err)
		}
		var gate *startgate.Gate
		readyErr := make(chan error, 1)
		if gated {
			var err error
			if gate, err = startgate.Listen(filepath.Join(s.env.Root, "gate.sock")); err != nil {
				t.Fatal(err)
			}
			defer gate.Close()
			spec.Annotations = map[string]string{startgate.Annotation: gate.Path()}
			go func() {
				err := comp.Ready(ctx)
				gate.Open(err)
				readyErr <- err
			}()
		} else {
			readyErr <- comp.Ready(ctx)
		}
		inv, err := s.pc.RunArgs(spec)
		if err != nil {
			t.Fatal(err)
		}
		_, runErr := s.pc.OutputInvocation(ctx, inv)
		rerr := <-readyErr
		var logs string
		if runErr == nil {
			time.Sleep(time.Second)
			logs, _ = Podman(t, "logs", s.container())
		}
		_ = s.pc.RemoveContainer(ctx, s.container(), 0)
		return logs, runErr, rerr
	}

	logs, runErr, readyErr := run(false)
	if readyErr == nil {
		t.Fatal("control: the broken changes dir did not fail the mount")
	}
	if runErr != nil || strings.TrimSpace(logs) != "0" {
		t.Fatalf("control: without the gate the container should run with an empty /var: run %v, /var entries %q", runErr, logs)
	}
	t.Logf("control: without the gate the sandbox ran with an empty /var (mount error: %v)", readyErr)

	_, runErr, readyErr = run(true)
	if readyErr == nil || runErr == nil {
		t.Fatalf("gated: the container ran although the mount failed (ready %v, run %v)", readyErr, runErr)
	}
	if !strings.Contains(runErr.Error(), "start gate") {
		t.Errorf("gated: podman's error does not name the gate: %v", runErr)
	}
	if out, _ := Podman(t, "ps", "-a", "--filter", "label="+domain.LabelKey+"="+s.anchor.Hash, "--format", "{{.Names}} {{.State}}"); strings.TrimSpace(out) != "" {
		t.Errorf("gated: a container is left: %s", out)
	}
	if _, err := os.Stat(filepath.Join(s.env.Root, "gate.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gate socket left: %v", err)
	}
}
