package cli

import (
	"errors"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// classify maps errors of the internal packages to an exit code and a hint.
func classify(err error) (int, string) {
	switch {
	case config.IsSecurity(err):
		return exitSecurity, "the configuration asks for something unsafe; fix the key named above (see docs/CONFIG.md)"
	case config.Errors(err) != nil:
		return exitConfig, "fix the key named above; `lazaret config check` lists every problem (see docs/CONFIG.md)"
	case errors.Is(err, podman.ErrNotInstalled):
		return exitSetup, "run `lazaret doctor` (or `make run`, which installs what is missing)"
	case errors.Is(err, podman.ErrNoSuchImage):
		return exitSetup, "run `lazaret image build` to build the local images"
	}
	return exitFailure, ""
}
