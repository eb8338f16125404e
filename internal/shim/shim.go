// Package shim is the lazaret-runsc runtime shim, a process and a binary
// of its own (cmd/lazaret-runsc): podman runs it as the OCI runtime, and
// it execs the pinned runsc with lazaret's flags.
package shim

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/startgate"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/runscflags"
	"github.com/lazaret-dev/lazaret/internal/sched"
)

// Platforms runsc can use here (internal/runscflags).
const (
	PlatformSystrap = runscflags.PlatformSystrap
	PlatformPtrace  = runscflags.PlatformPtrace
)

// ShimFlags are the global runsc flags lazaret always adds
// (runscflags.Global).
func ShimFlags(platform string) []string { return runscflags.Global(platform) }

// DetectPlatform chooses the runsc platform (runscflags.DetectPlatform).
func DetectPlatform() string { return runscflags.DetectPlatform() }

// ShimArgs rewrites the argv podman (or conmon) gave the runtime into the
// argv for the real runsc at path real. Lazaret's global flags come first:
// runsc parses global flags before the subcommand, and Go's flag package
// lets a later occurrence win, so a flag podman passes on purpose still
// overrides ours. The --tty flag conmon 2.1.6 passes to `exec` (which runsc
// does not define) is dropped, and its --preserve-fds N (podman exec
// --preserve-fds: descriptors 3..N+2 go to the process) becomes runsc's
// --pass-fd 3:3 … (the session holder's key arrives on fd 3).
func ShimArgs(real string, args []string, platform string) []string {
	out := []string{real}
	out = append(out, ShimFlags(platform)...)
	if len(args) <= 1 {
		return out
	}
	rest := args[1:]
	sub := subcommandIndex(rest)
	if sub < 0 || rest[sub] != "exec" {
		return append(out, rest...)
	}
	out = append(out, rest[:sub+1]...)
	i := sub + 1
	for ; i < len(rest); i++ {
		a := rest[i]
		if a == "--" || isContainerID(a) {
			break
		}
		if isTTYFlag(a) {
			continue
		}
		if n, skip, ok := preserveFDs(rest[i:]); ok {
			for fd := 3; fd < 3+n; fd++ {
				out = append(out, fmt.Sprintf("--pass-fd=%d:%d", fd, fd))
			}
			i += skip
			continue
		}
		out = append(out, a)
	}
	return append(out, rest[i:]...)
}

// maxPreservedFDs bounds --preserve-fds (podman passes a handful at most).
const maxPreservedFDs = 64

// preserveFDs recognises --preserve-fds N or --preserve-fds=N at args[0]:
// it returns N and how many more arguments the flag took. A malformed
// value is left for runsc to refuse.
func preserveFDs(args []string) (n, skip int, ok bool) {
	name := strings.TrimLeft(args[0], "-")
	if len(args[0])-len(name) == 0 || len(args[0])-len(name) > 2 {
		return 0, 0, false
	}
	var val string
	switch {
	case name == "preserve-fds" && len(args) > 1:
		val, skip = args[1], 1
	case strings.HasPrefix(name, "preserve-fds="):
		val = strings.TrimPrefix(name, "preserve-fds=")
	default:
		return 0, 0, false
	}
	n, err := strconv.Atoi(val)
	if err != nil || n < 0 || n > maxPreservedFDs {
		return 0, 0, false
	}
	return n, skip, true
}

// runscGlobalValueFlags are the global runsc flags podman passes with a
// separate value argument; every other global flag is a boolean or uses
// the --flag=value form.
var runscGlobalValueFlags = map[string]bool{
	"root": true, "log": true, "log-format": true, "debug-log": true,
	"platform": true, "network": true, "host-uds": true, "panic-log": true,
	"debug-log-format": true, "overlay2": true, "file-access": true,
	"file-access-mounts": true, "strace-syscalls": true,
}

// subcommandIndex returns the index in args of runsc's subcommand: the
// first argument that is neither a flag nor the value of a global flag.
func subcommandIndex(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return i
		}
		if a == "--" {
			return -1
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if runscGlobalValueFlags[name] {
			i++ // skip its value
		}
	}
	return -1
}

func isTTYFlag(a string) bool {
	name := strings.TrimLeft(a, "-")
	if !strings.HasPrefix(a, "-") || len(a)-len(name) > 2 {
		return false
	}
	return name == "tty" || strings.HasPrefix(name, "tty=")
}

// isContainerID reports whether a is podman's 64-hex container ID, the
// positional argument that ends runsc exec's flags.
func isContainerID(a string) bool {
	if len(a) != 64 {
		return false
	}
	for _, c := range a {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// RunShim replaces the process with the real runsc. It returns only on
// failure, with an error for the caller to print (podman shows the
// runtime's stderr to the user).
func RunShim(args []string) error {
	real, err := locate.Find(locate.Runsc)
	if err != nil {
		return fmt.Errorf("lazaret-runsc: %w (run `lazaret doctor`)", err)
	}
	// Priority and affinity are per thread until the exec: keep this
	// goroutine on the thread that sets them and then executes runsc.
	runtime.LockOSThread()
	if bundle, ok := createBundle(args); ok {
		if err := waitAtGate(bundle); err != nil {
			return fmt.Errorf("lazaret-runsc: %w", err)
		}
		if err := applySched(bundle); err != nil {
			return fmt.Errorf("lazaret-runsc: %w", err)
		}
	}
	argv := ShimArgs(real, args, DetectPlatform())
	if err := syscall.Exec(real, argv, os.Environ()); err != nil {
		return fmt.Errorf("lazaret-runsc: exec %s: %w", real, err)
	}
	return nil
}

// gateTimeout bounds how long a create waits for the coordinator's
// answer; the coordinator answers or dies (closing the connection) well
// before.
const gateTimeout = 5 * time.Minute

// waitAtGate holds a create whose spec names a start gate until the
// coordinator opens it (internal/engine/startgate).
func waitAtGate(bundle string) error {
	path, err := startgate.FromBundle(bundle)
	if err != nil || path == "" {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), gateTimeout)
	defer cancel()
	return startgate.Wait(ctx, path)
}

// applySched gives the sandbox's processes the priority and CPUs its spec
// names (sched.Annotation): set here, before runsc create starts
// the Sentry and the gofer, they hold for every process of the sandbox.
func applySched(bundle string) error {
	a, err := startgate.SpecAnnotation(bundle, sched.Annotation)
	if err != nil || a == "" {
		return err
	}
	sc, err := sched.ParseSched(a)
	if err != nil {
		return err
	}
	return sc.Apply()
}

// createBundle reports whether args (the runtime's argv) are a create,
// and its bundle directory: --bundle's value, or runsc's default, the
// working directory.
func createBundle(args []string) (string, bool) {
	if len(args) <= 1 {
		return "", false
	}
	rest := args[1:]
	sub := subcommandIndex(rest)
	if sub < 0 || rest[sub] != "create" {
		return "", false
	}
	for i := sub + 1; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			break
		}
		name := strings.TrimLeft(a, "-")
		if len(a)-len(name) == 0 || len(a)-len(name) > 2 {
			continue
		}
		if v, ok := strings.CutPrefix(name, "bundle="); ok {
			return v, true
		}
		if name == "bundle" && i+1 < len(rest) {
			return rest[i+1], true
		}
	}
	return ".", true
}

// ExitSetup is the shim's exit status when runsc could not be executed:
// lazaret's "environment not ready" (internal/cli/exit.go).
const ExitSetup = 3

// Main runs the shim: it returns only when the real runsc could not be
// executed. It has no flags of its own and writes its one error to
// stderr, where podman shows it.
func Main(args []string) int {
	if err := RunShim(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitSetup
	}
	return 0
}
