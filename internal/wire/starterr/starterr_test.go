package starterr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

func TestWireErrors(t *testing.T) {
	for _, tc := range []struct {
		err      error
		sentinel error
	}{
		{fmt.Errorf("run: %w", podman.ErrNoSuchImage), podman.ErrNoSuchImage},
		{podman.ErrNotInstalled, podman.ErrNotInstalled},
		{fmt.Errorf("runsc: %w", locate.ErrNotFound), locate.ErrNotFound},
	} {
		we := ToWire(tc.err)
		back := FromWire(we)
		if !errors.Is(back, tc.sentinel) || back.Error() != tc.err.Error() {
			t.Errorf("%v → %v → %v", tc.err, we.Code, back)
		}
	}
	if we := ToWire(errors.New("boom")); we.Code != CodeStartFailed {
		t.Errorf("generic: %s", we.Code)
	}
}
