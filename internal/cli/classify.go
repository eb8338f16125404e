package cli

import (
	"errors"

	"github.com/lazaret-dev/lazaret/internal/podman"
)

// classify maps errors of the internal packages to an exit code and a hint.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, podman.ErrNotInstalled):
		return exitSetup, "run `lazaret doctor` (or `make run`, which installs what is missing)"
	case errors.Is(err, podman.ErrNoSuchImage):
		return exitSetup, "run `lazaret image build` to build the local images"
	}
	return exitFailure, ""
}
