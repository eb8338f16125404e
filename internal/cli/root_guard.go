package cli

import (
	"errors"
	"os"
)

var errRoot = errors.New("refusing to run as root: lazaret runs agents in rootless podman as an unprivileged user")

// refuseRoot stops commands that start or build containers when run as
// root without --allow-root: rootful podman would give the sandbox real
// root's user namespace.
func (g *globalOptions) refuseRoot() error {
	if os.Geteuid() == 0 && !g.allowRoot {
		return withHint(errRoot, exitSecurity, "run as a normal user (`make run` does this for you as the user \"lazaret\"), or pass --allow-root")
	}
	return nil
}
