package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/atomicfile"
	"github.com/lazaret-dev/lazaret/internal/cabundle"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/hostres"
	"github.com/lazaret-dev/lazaret/internal/sched"
)

// Paths inside the sandbox.
const (
	WorkspaceDir = domain.SandboxWorkspace
)

// Labels every agent container carries.
const (
	LabelDomain   = domain.LabelKey // the Domain Anchor hash
	LabelProfile  = "lazaret.profile"
	LabelDataRoot = domain.LabelDataRoot
)

// The profile's pids bound the number of tasks in the sandbox
// (config.DefaultPids: enough for a parallel build, low enough that a fork
// bomb stops long before it starves the host).
//
// It is passed twice. --pids-limit is the cgroup limit DESIGN §5 names, but
// runsc runs with --ignore-cgroups (rootless), so nothing enforces it
// (measured: pids.max reads "max" inside). RLIMIT_NPROC is enforced by
// gVisor itself (measured: with nproc=20 the 21st fork fails), and since
// the sandbox's root has no CAP_SYS_RESOURCE or CAP_SYS_ADMIN it applies
// to root too; it counts per uid, so it is the sandbox-wide bound for
// everything running as root.

// Capabilities is the short list of capabilities the sandbox's root keeps
// after --cap-drop=ALL. They are what package managers (apt/dpkg, npm -g,
// pip) need as root inside the container, and all of them act only inside
// the rootless user namespace under gVisor:
//   - CHOWN, FOWNER, FSETID: dpkg and tar restore the owner and mode
//     (including setgid directories) of the files they unpack.
//   - DAC_OVERRIDE: root writing into directories owned by other users of
//     the image (/var/lib/apt/lists/partial is owned by _apt).
//   - SETUID, SETGID: apt drops to the _apt user for downloads; su/runuser
//     to a build user.
//   - KILL: signalling processes that run as another uid (apt's helpers).
//
// Dropped on purpose, among others: NET_RAW (no raw sockets to craft
// packets), NET_BIND_SERVICE, SYS_CHROOT, MKNOD, SETFCAP, SETPCAP,
// AUDIT_WRITE.
var Capabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL"}

// InitCommand is the sandbox's PID 1: a POSIX shell (every agent image has
// one) that waits forever. `wait` in dash and bash reaps any child, so
// orphans re-parented to PID 1 do not stay zombies, and the trap makes it
// exit at once on podman's SIGTERM (a PID 1 without a handler ignores
// SIGTERM, which would make every stop wait for its timeout).
var InitCommand = []string{"/bin/sh", "-c", `trap 'exit 0' TERM INT HUP; while :; do sleep 2147483647 & wait $!; done`}

// NewSpec returns the container spec of profile p in the domain a, before
// the components' Prepare. volumes are the profile's custom volumes
// resolved for a (Profile.ResolveVolumes).
func NewSpec(p *config.Profile, a *domain.Anchor, volumes []config.ResolvedVolume) (*podman.ContainerSpec, error) {
	host, err := hostres.Probe()
	if err != nil {
		return nil, err
	}
	plan, err := hostres.Decide(p.Name, p.Resources, host)
	if err != nil {
		return nil, err
	}
	spec := &podman.ContainerSpec{
		Name:  a.Container(),
		Image: p.Image,
		Labels: map[string]string{
			LabelDomain:   a.Hash,
			LabelProfile:  p.Name,
			LabelDataRoot: a.DataRoot,
		},
		Env:         map[string]string{},
		CapDrop:     []string{"ALL"},
		CapAdd:      append([]string(nil), Capabilities...),
		SecurityOpt: []string{"no-new-privileges"},
		PidsLimit:   plan.Pids,
		Hostname:    "lazaret-" + p.Name,
		ExtraArgs:   []string{"--ulimit", fmt.Sprintf("nproc=%d:%d", plan.Pids, plan.Pids)},
		// The shim sets the sandbox's priority and CPUs from it.
		Annotations: map[string]string{sched.Annotation: plan.Sched.Encode()},
		Workdir:     WorkspaceDir,
		Command:     append([]string(nil), InitCommand...),
	}
	// Values (secrets among them) reach podman only through its env file
	// (podman.Invocation); what that file cannot carry is refused here,
	// naming the profile.
	if err := podman.ValidateEnv(p.Env); err != nil {
		return nil, fmt.Errorf("profile %s: env: %w", p.Name, err)
	}
	for k, v := range p.Env {
		spec.Env[k] = v
	}
	spec.Env["LAZARET_PROFILE"] = p.Name
	spec.Env["LAZARET_DOMAIN"] = a.Hash
	// In direct mode /workspace belongs to the host user, which inside the
	// user namespace may map to "nobody" (root's repository handed to the
	// unprivileged user by `make run`), and git then refuses to work there.
	// Inside the sandbox the ownership check protects nobody: the agent is
	// the only user. Given as command-line-level config so no file is needed.
	if _, set := spec.Env["GIT_CONFIG_COUNT"]; !set {
		spec.Env["GIT_CONFIG_COUNT"] = "1"
		spec.Env["GIT_CONFIG_KEY_0"] = "safe.directory"
		spec.Env["GIT_CONFIG_VALUE_0"] = WorkspaceDir
	}
	if err := addCABundle(spec, p, a); err != nil {
		return nil, err
	}
	addTmp(spec, p, volumes, plan.Memory)
	for _, v := range volumes {
		if !path.IsAbs(v.Container) {
			return nil, fmt.Errorf("volume %s: container path %q is not absolute", v.Host, v.Container)
		}
		spec.Mounts = append(spec.Mounts, podman.Mount{
			Type: "bind", Source: v.Host, Target: path.Clean(v.Container),
			ReadOnly: v.ReadOnly, Options: append([]string(nil), v.Options...),
		})
	}
	return spec, nil
}

// addTmp mounts /tmp as a tmpfs of at most the sandbox's memory: runsc
// otherwise gives /tmp a tmpfs of half the host's RAM, which a write
// there would then take before the memory watchdog sees it as the
// sandbox's. A full /tmp is ENOSPC inside, as in a VM of that size. A
// profile that persists /tmp or mounts a volume there keeps its own.
func addTmp(spec *podman.ContainerSpec, p *config.Profile, volumes []config.ResolvedVolume, memory int64) {
	if slices.Contains(p.PersistentDirs, "/tmp") {
		return
	}
	for _, v := range volumes {
		if path.Clean(v.Container) == "/tmp" {
			return
		}
	}
	spec.Mounts = append(spec.Mounts, podman.Mount{Type: "tmpfs", Target: "/tmp",
		Options: []string{"tmpfs-size=" + strconv.FormatInt(memory, 10), "tmpfs-mode=1777", "nosuid", "nodev"}})
}

// CABundlePath is where the host's CA bundle is mounted in the sandbox. The
// image's own trust store stays where it is: its package manager keeps
// updating it (update-ca-certificates would fail on a read-only mount).
const CABundlePath = "/run/lazaret/ca-certificates.crt"

// CAEnv are the variables that point TLS clients at CABundlePath: OpenSSL,
// Go, Python's ssl (SSL_CERT_FILE), Node (NODE_EXTRA_CA_CERTS, added to
// its built-in roots), requests, curl and git. A profile's env wins.
var CAEnv = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"}

// addCABundle passes the profile's host CA bundle into the sandbox: a
// TLS-intercepting proxy's CA is in the host's trust store, so the host's
// bundle is the one the sandbox's clients should use. Only its
// certificates are copied, into a per-domain file in the runtime dir,
// taken when the container is created and mounted read-only: whatever the
// host file holds besides certificates, or becomes later, never reaches
// the sandbox. A default bundle the host lacks is skipped (the image's own
// applies); a configured one must be valid.
func addCABundle(spec *podman.ContainerSpec, p *config.Profile, a *domain.Anchor) error {
	ca := p.CABundle
	if ca.Path == "" {
		return nil
	}
	data, _, err := cabundle.Load(ca.Path)
	if err != nil {
		if !ca.Explicit {
			return nil
		}
		return ca.Locate(err)
	}
	if !filepath.IsAbs(a.RuntimeDir) {
		return fmt.Errorf("ca bundle: no runtime directory")
	}
	snap := a.CABundleSnapshot()
	if err := WriteFileAtomic(snap, data, 0o644); err != nil {
		return fmt.Errorf("ca bundle: %w", err)
	}
	spec.Mounts = append(spec.Mounts, podman.Mount{Type: "bind", Source: snap, Target: CABundlePath, ReadOnly: true})
	for _, k := range CAEnv {
		if _, set := spec.Env[k]; !set {
			spec.Env[k] = CABundlePath
		}
	}
	return nil
}

// WriteFileAtomic replaces name with data (temp file, rename): a planted
// symlink at name is replaced, never followed.
func WriteFileAtomic(name string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(name, data, mode)
}

// Finalize fills in what no component set: the Agent Workspace at
// /workspace (direct mode; Git Sentry mounts its agent clone there in
// branch mode) and the network "none" (the network sidecar joins the
// container to its namespace when it runs). It runs after every
// component's Prepare.
func Finalize(spec *podman.ContainerSpec, a *domain.Anchor) {
	if !HasMount(spec, WorkspaceDir) {
		spec.Mounts = append([]podman.Mount{{
			Type: "bind", Source: a.Workspace, Target: WorkspaceDir, Options: []string{"z"},
		}}, spec.Mounts...)
	}
	if spec.Network == "" {
		spec.Network = "none"
	}
	SealRunDir(spec)
}

// RunDir is lazaret's directory in the sandbox: the escalation client and
// its socket, the TLS directory, Git Sentry's files, the CA bundles.
const RunDir = "/run/lazaret"

// SealRunDir makes every directory on the way to what lazaret mounts under
// RunDir a mount point of its own, so that nothing there can be renamed,
// replaced or shadowed from inside: a directory that is not a mount point
// can be renamed by the sandbox's root even when it holds only mount
// points (measured), after which a path like /run/lazaret/bin/... names
// whatever the agent put in its place; a mount point cannot (EBUSY). So
// /run becomes a tmpfs (as on any booted system; /run/lock with it), and
// RunDir and each directory between it and a mount under it a read-only
// tmpfs, on which runsc makes the mount points. Parents are mounted first.
func SealRunDir(spec *podman.ContainerSpec) {
	targets := map[string]bool{}
	under := false
	for _, m := range spec.Mounts {
		t := path.Clean(m.Target)
		targets[t] = true
		under = under || t == RunDir || strings.HasPrefix(t, RunDir+"/")
	}
	if !under {
		return
	}
	var add []podman.Mount
	dir := func(d, size, mode string, ro bool) {
		if !targets[d] {
			targets[d] = true
			add = append(add, podman.Mount{Type: "tmpfs", Target: d, ReadOnly: ro,
				Options: []string{"tmpfs-size=" + size, "tmpfs-mode=" + mode, "nosuid", "nodev"}})
		}
	}
	if !targets["/run"] {
		dir("/run", "64m", "755", false)
		dir("/run/lock", "4m", "1777", false)
	}
	dir(RunDir, "64k", "755", true)
	for _, m := range spec.Mounts {
		for d := path.Dir(path.Clean(m.Target)); strings.HasPrefix(d, RunDir+"/"); d = path.Dir(d) {
			dir(d, "64k", "755", true)
		}
	}
	slices.SortStableFunc(add, func(a, b podman.Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	})
	spec.Mounts = append(add, spec.Mounts...)
}

// HasMount reports whether spec already mounts something at target.
func HasMount(spec *podman.ContainerSpec, target string) bool {
	for _, m := range spec.Mounts {
		if path.Clean(m.Target) == path.Clean(target) {
			return true
		}
	}
	return false
}
