// Package runscflags holds the runsc flags lazaret runs every runsc
// with: the lazaret-runsc shim's (internal/shim) and the CLI's runsc exec
// (internal/adapter/runscexec) must agree.
package runscflags

import (
	"os"
	"runtime"
	"strings"
)

// Platforms runsc can use here. kvm is not offered: it hangs under nested
// virtualisation (ENVIRONMENT.md).
const (
	PlatformSystrap = "systrap"
	PlatformPtrace  = "ptrace"
)

// seccompActions lists the seccomp return actions the kernel supports.
const seccompActions = "/proc/sys/kernel/seccomp/actions_avail"

// Global are the global runsc flags lazaret always adds, to every runsc
// the shim starts and to the CLI's runsc exec (internal/adapter/runscexec):
//   - --ignore-cgroups: rootless podman cannot delegate cgroups to runsc
//     (ENVIRONMENT.md; --rootless is refused with create).
//   - --host-uds=open: the escalation socket is a bind-mounted UNIX socket.
//   - --network=host: the sandbox's sockets are host-kernel sockets in the
//     sidecar's network namespace, so its nftables policy applies (DESIGN §8).
func Global(platform string) []string {
	return []string{"--ignore-cgroups", "--host-uds=open", "--network=host", "--platform=" + platform}
}

// DetectPlatform chooses systrap when the kernel offers what it needs and
// ptrace otherwise. systrap stops the sandboxed threads with seccomp's
// SECCOMP_RET_TRAP, so it needs seccomp filtering with the "trap" action;
// it is implemented for amd64 and arm64. The check is one read of a procfs
// file, cheap enough to run on every shim invocation, so nothing is cached
// (a cache would be one more file to trust and keep fresh).
func DetectPlatform() string {
	data, err := os.ReadFile(seccompActions)
	if err != nil {
		return PlatformPtrace
	}
	return platformFor(string(data), runtime.GOARCH)
}

func platformFor(actionsAvail, goarch string) string {
	if goarch != "amd64" && goarch != "arm64" {
		return PlatformPtrace
	}
	for _, a := range strings.Fields(actionsAvail) {
		if a == "trap" {
			return PlatformSystrap
		}
	}
	return PlatformPtrace
}
