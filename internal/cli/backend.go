package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/locate"
)

// The backends: the local one (rootless podman + runsc) and the cluster
// one, which is the lazaret-kube binary.
const (
	backendPodman     = "podman"
	backendKubernetes = "kubernetes"
	// backendEnv selects the backend when --backend is not given.
	backendEnv = "LAZARET_BACKEND"
)

// valueFlags are lazaret's global flags that take a separate value word.
var valueFlags = map[string]bool{"--config": true, "--workspace": true, "--attempt": true}

// splitBackend takes --backend out of args (lazaret's own flags: before
// "--", and for exec before its first argument, which starts the
// command or names the profile) and returns the backend, from the flag,
// else LAZARET_BACKEND, else podman.
func splitBackend(args []string, getenv func(string) string) (string, []string, error) {
	backend, source := getenv(backendEnv), backendEnv
	rest := make([]string, 0, len(args))
	verb := ""
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || verb == "exec" && !strings.HasPrefix(a, "-") {
			break
		}
		if v, ok := strings.CutPrefix(a, "--backend="); ok {
			backend, source = v, "--backend"
			continue
		}
		if a == "--backend" {
			if i+1 >= len(args) {
				return "", nil, usageError{errors.New("--backend: needs a value (podman or kubernetes)")}
			}
			backend, source = args[i+1], "--backend"
			i++
			continue
		}
		rest = append(rest, a)
		if valueFlags[a] && i+1 < len(args) {
			rest = append(rest, args[i+1])
			i++
		} else if verb == "" && !strings.HasPrefix(a, "-") {
			verb = a
		}
	}
	rest = append(rest, args[i:]...)
	switch backend {
	case "", backendPodman:
		return backendPodman, rest, nil
	case backendKubernetes:
		return backendKubernetes, rest, nil
	}
	return "", nil, usageError{fmt.Errorf("%s: unknown backend %q (want %q or %q)", source, backend, backendPodman, backendKubernetes)}
}

// execKube replaces this process with lazaret-kube running args.
func execKube(args []string) error {
	path, err := locate.Find(locate.Kube)
	if err != nil {
		return withHint(err, exitSetup, "install lazaret-kube beside lazaret (`make install`), or set LAZARET_KUBE")
	}
	argv := append([]string{locate.Kube}, args...)
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("running %s: %w", path, err)
	}
	return nil
}
