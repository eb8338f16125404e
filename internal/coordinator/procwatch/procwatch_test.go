package procwatch

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestWaitSeesAnExit: a running child is alive; Wait returns once it has
// exited (as a zombie, not yet reaped, which must count as ended).
// Control: Wait on this test process runs until its context ends.
func TestWaitSeesAnExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	p, err := Find(cmd.Process.Pid)
	if err != nil || !p.Alive() {
		t.Fatalf("child not alive: %v", err)
	}
	cmd.Process.Kill()
	if err := p.Wait(context.Background(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	self, err := Find(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := self.Wait(ctx, 10*time.Millisecond); err == nil {
		t.Error("Wait returned for a live process")
	}
	if _, err := Find(0); err == nil {
		t.Error("pid 0 found")
	}
}
