// Package doctor checks that this machine can run lazaret's rootless
// sandboxes and says, for each failed check, exactly how to fix it.
package doctor

import (
	"bufio"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/version"
)

// Result is the outcome of one check.
type Result struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Fix is the exact remedy when the check failed.
	Fix string `json:"fix,omitempty"`
	// Warning marks a finding that does not stop lazaret from working.
	Warning bool `json:"warning,omitempty"`
}

// Env is what the checks look at; tests replace its parts.
type Env struct {
	Podman     *podman.Client
	SubUIDFile string // /etc/subuid
	SubGIDFile string // /etc/subgid
	// NetdImage is the sidecar image reference of this version.
	NetdImage string
	// THPDir is /sys/kernel/mm/transparent_hugepage.
	THPDir string
	// DataRoot is the configuration's data_root; "" skips the State
	// Anchor's mode check (no configuration could be read).
	DataRoot string
	// Config, when it could be loaded, gives the profiles whose resource
	// limits are checked, and the notifiers ([notify]).
	Config *config.Config
	// BusAddress is the session bus of the desktop notifier's check; ""
	// is the user's.
	BusAddress string
}

const setupFix = "run `make setup` in the lazaret repository (scripts/setup)"

// Run runs every check in order.
func Run(ctx context.Context, env *Env) []Result {
	if env.SubUIDFile == "" {
		env.SubUIDFile = "/etc/subuid"
	}
	if env.SubGIDFile == "" {
		env.SubGIDFile = "/etc/subgid"
	}
	if env.THPDir == "" {
		env.THPDir = "/sys/kernel/mm/transparent_hugepage"
	}
	var rs []Result
	rs = append(rs, checkUser())
	rs = append(rs, checkRuntimeDir())
	rs = append(rs, checkBinary(podman.DefaultBin, "apt-get install podman ("+setupFix+")"))
	rs = append(rs, checkBinary("conmon", "apt-get install conmon"))
	rs = append(rs, checkBinary("runc", "apt-get install runc (the network sidecar runs under runc)"))
	rs = append(rs, checkBinary("fuse-overlayfs", "apt-get install fuse-overlayfs"))
	rs = append(rs, checkBinary("newuidmap", "apt-get install uidmap"))
	rs = append(rs, checkBinary("mmdebstrap", "apt-get install mmdebstrap (needed by `lazaret image build`)"))
	rs = append(rs, checkRunsc())
	rs = append(rs, checkCompanion(locate.Shim), checkCompanion(locate.Escalate), checkCompanion(locate.EscalateGo), checkCompanion(locate.Netd),
		optionalCompanion(locate.FSMonitor, "without it `git status` in a Git Sentry clone checks every file (slow on large repositories)"))
	rs = append(rs, checkPlatform())
	rs = append(rs, checkHugePages(env.THPDir))
	rs = append(rs, checkSubIDs(env.SubUIDFile, "subuid"), checkSubIDs(env.SubGIDFile, "subgid"))
	rs = append(rs, checkDevice("/dev/fuse", "fuse-overlayfs (State Anchor, podman storage)"))
	rs = append(rs, checkDevice("/dev/net/tun", "the rootless network (slirp4netns/pasta)"))
	rs = append(rs, checkNftables())
	if env.DataRoot != "" {
		rs = append(rs, checkStateModes(env.DataRoot))
	}
	if env.Config != nil {
		rs = append(rs, checkLimits(env.Config)...)
		rs = append(rs, checkNotify(ctx, env.Config.Notify, env.BusAddress)...)
	}
	rs = append(rs, checkPodman(ctx, env.Podman)...)
	rs = append(rs, checkImage(ctx, env.Podman, config.DefaultImage))
	if env.NetdImage != "" {
		// The coordinator builds a missing sidecar image at start (it is
		// tagged per version), so its absence only costs a few seconds.
		r := checkImage(ctx, env.Podman, env.NetdImage)
		if !r.OK {
			r.Warning = true
			r.Detail += " (built automatically at the first start of this version)"
		}
		rs = append(rs, r)
	}
	return rs
}

func pass(name, detail string) Result { return Result{Name: name, OK: true, Detail: detail} }

func fail(name, detail, fix string) Result {
	return Result{Name: name, Detail: detail, Fix: fix}
}

func checkUser() Result {
	if os.Geteuid() == 0 {
		r := fail("user", "running as root", "run lazaret as a normal user; `make run` as root runs it as the unprivileged user \"lazaret\"")
		r.Warning = true
		return r
	}
	u, err := user.Current()
	if err != nil {
		return pass("user", fmt.Sprintf("uid %d", os.Getuid()))
	}
	return pass("user", fmt.Sprintf("%s (uid %s), rootless", u.Username, u.Uid))
}

func checkRuntimeDir() Result {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	fix := fmt.Sprintf("sudo install -d -m 0700 -o %d /run/user/%d && export XDG_RUNTIME_DIR=/run/user/%d", os.Getuid(), os.Getuid(), os.Getuid())
	if dir == "" {
		return fail("XDG_RUNTIME_DIR", "not set (rootless podman keeps its state there)", fix)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fail("XDG_RUNTIME_DIR", err.Error(), fix)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != os.Getuid() {
		return fail("XDG_RUNTIME_DIR", fmt.Sprintf("%s is owned by uid %d, not you", dir, st.Uid), fix)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fail("XDG_RUNTIME_DIR", fmt.Sprintf("%s has mode %v", dir, fi.Mode().Perm()), "chmod 0700 "+dir)
	}
	return pass("XDG_RUNTIME_DIR", dir)
}

func checkBinary(name, fix string) Result {
	p, err := exec.LookPath(name)
	if err != nil {
		return fail(name, "not found on PATH", fix)
	}
	return pass(name, p)
}

func checkRunsc() Result {
	p, err := locate.Find(locate.Runsc)
	if err != nil {
		return fail("runsc", "the pinned gVisor runsc is not installed (Debian's runsc package is too old)", setupFix+"; it builds gvisor.dev/gvisor/runsc@"+version.RunscVersion+" statically")
	}
	if static, err := isStatic(p); err != nil || !static {
		return fail("runsc", p+" is dynamically linked: runsc then fails at sandbox start with `fork/exec /proc/self/exe`", setupFix+" (it builds runsc with CGO_ENABLED=0)")
	}
	stamp, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "runsc.version"))
	if r, ok := runscStampResult(p, strings.TrimSpace(string(stamp))); !ok {
		return r
	}
	return pass("runsc", p+" ("+version.RunscVersion+", static, seccomp filters precompiled)")
}

// runscStampResult judges the installed runsc's stamp: another version, or
// the pinned one built without its seccomp filters precompiled (an older
// setup: each sandbox start then compiles them), is a warning.
func runscStampResult(p, stamp string) (Result, bool) {
	var r Result
	switch stamp {
	case version.RunscStamp:
		return r, true
	case version.RunscVersion:
		r = fail("runsc", p+" was built without its seccomp filters precompiled: every sandbox start compiles them (≈ 55 ms)", setupFix+" to rebuild it")
	default:
		r = fail("runsc", fmt.Sprintf("%s is version %q, lazaret is tested with %s", p, stamp, version.RunscStamp), setupFix+" to build the pinned version")
	}
	r.Warning = true
	return r, false
}

func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

func checkCompanion(name string) Result {
	p, err := locate.Find(name)
	if err != nil {
		return fail(name, err.Error(), "`make install` (or keep "+name+" beside the lazaret binary)")
	}
	return pass(name, p)
}

// optionalCompanion is checkCompanion for a companion lazaret works
// without: its absence is a warning saying what is lost.
func optionalCompanion(name, without string) Result {
	r := checkCompanion(name)
	if !r.OK {
		r.Warning = true
		r.Detail += "; " + without
	}
	return r
}

// checkPlatform reports which runsc platform the shim can use: systrap
// needs seccomp filters; ptrace is the fallback; kvm hangs in nested VMs.
func checkPlatform() Result {
	status, err := os.ReadFile("/proc/self/status")
	if err == nil && strings.Contains(string(status), "\nSeccomp:") {
		return pass("runsc platform", "systrap (seccomp available)")
	}
	r := fail("runsc platform", "seccomp unavailable: runsc falls back to the slower ptrace platform", "use a kernel with CONFIG_SECCOMP_FILTER")
	r.Warning = true
	return r
}

// checkHugePages reports whether runsc will back the sandbox's memory with
// huge pages: the same decision runsc/boot/loader.go makes from these two
// files. Without them every 4 KiB page the workload touches is a fault
// through the Sentry (a workspace build 2.3x the host instead of 1.6x,
// docs/PERFORMANCE.md).
func checkHugePages(dir string) Result {
	const name = "sandbox huge pages"
	shmem, err1 := thpSelected(filepath.Join(dir, "shmem_enabled"))
	defrag, err2 := thpSelected(filepath.Join(dir, "defrag"))
	if err1 != nil || err2 != nil {
		return pass(name, "the kernel has no transparent huge pages; runsc uses 4 KiB pages")
	}
	switch {
	case shmem == "always" || shmem == "within_size" || shmem == "force":
		return pass(name, "on (shmem_enabled="+shmem+")")
	case shmem == "advise" && (defrag == "always" || defrag == "defer" || defrag == "never"):
		return pass(name, "on (shmem_enabled=advise, defrag="+defrag+")")
	}
	want := "echo advise | sudo tee " + filepath.Join(dir, "shmem_enabled")
	if shmem == "advise" || shmem == "never" {
		switch defrag {
		case "madvise":
			want += "; echo never | sudo tee " + filepath.Join(dir, "defrag")
		case "defer+madvise":
			want += "; echo defer | sudo tee " + filepath.Join(dir, "defrag")
		}
	}
	if shmem == "deny" {
		want = "shmem_enabled=deny is an administrator's choice; lazaret leaves it"
	}
	r := fail(name, fmt.Sprintf("off (shmem_enabled=%s, defrag=%s): builds in the sandbox are slower", shmem, defrag),
		want+" ("+setupFix+" does this)")
	r.Warning = true
	return r
}

// thpSelected reads the bracketed choice of a transparent_hugepage file,
// as in "always [madvise] never".
func thpSelected(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return "", fmt.Errorf("%s: no selected value in %q", path, strings.TrimSpace(s))
	}
	return s[i+1 : j], nil
}

func checkSubIDs(file, kind string) Result {
	u, err := user.Current()
	if err != nil {
		return fail(kind, err.Error(), "")
	}
	n, err := subIDCount(file, u.Username, u.Uid)
	fix := fmt.Sprintf("sudo usermod --add-%ss 100000-165535 %s", kind, u.Username)
	if err != nil {
		return fail(kind, err.Error(), fix)
	}
	if n < 65536 {
		return fail(kind, fmt.Sprintf("%s has %d ids for %s; rootless containers need 65536", file, n, u.Username), fix)
	}
	return pass(kind, fmt.Sprintf("%d ids in %s", n, file))
}

// subIDCount sums the ranges of file that belong to name or uid.
func subIDCount(file, name, uid string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 || (parts[0] != name && parts[0] != uid) {
			continue
		}
		n, err := strconv.Atoi(parts[2])
		if err == nil {
			total += n
		}
	}
	return total, sc.Err()
}

func checkDevice(path, usedBy string) Result {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fail(path, fmt.Sprintf("cannot open read-write (%v); needed by %s", err, usedBy), "sudo chmod 666 "+path)
	}
	f.Close()
	return pass(path, "read-write")
}

func checkNftables() Result {
	if _, err := os.Stat("/sys/module/nf_tables"); err == nil {
		return pass("nftables", "nf_tables module loaded")
	}
	if kernelConfigHas("CONFIG_NF_TABLES=y", "CONFIG_NF_TABLES=m") {
		return pass("nftables", "nf_tables in the kernel configuration")
	}
	var uts syscall.Utsname
	if syscall.Uname(&uts) == nil {
		rel := utsString(uts.Release[:])
		if b, err := os.ReadFile("/lib/modules/" + rel + "/modules.builtin"); err == nil && strings.Contains(string(b), "/nf_tables.ko") {
			return pass("nftables", "nf_tables built into the kernel")
		}
	}
	r := fail("nftables", "cannot tell whether the kernel has nf_tables; without it the network sidecar fails closed (no network)", "sudo modprobe nf_tables")
	r.Warning = true
	return r
}

// kernelConfigHas reports whether /proc/config.gz contains any of lines.
func kernelConfigHas(lines ...string) bool {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return false
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		for _, l := range lines {
			if sc.Text() == l {
				return true
			}
		}
	}
	return false
}

func utsString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

func checkPodman(ctx context.Context, c *podman.Client) []Result {
	info, err := c.Info(ctx)
	if err != nil {
		if errors.Is(err, podman.ErrBadOutput) {
			return []Result{fail("podman info", err.Error(), "")}
		}
		if errors.Is(err, podman.ErrUserNamespaceLost) {
			return []Result{fail("podman info", err.Error(), "run `podman system migrate`: podman's pause process was killed, and the containers it kept are gone")}
		}
		return []Result{fail("podman info", err.Error(), "fix the error above; `podman info` must work as this user ("+setupFix+")")}
	}
	rs := []Result{pass("podman", "version "+info.Version.Version)}
	if !info.Host.Security.Rootless {
		r := fail("rootless", "podman is running rootful", "run lazaret as a normal user")
		r.Warning = true
		rs = append(rs, r)
	}
	if d := info.Store.GraphDriverName; d != "overlay" {
		rs = append(rs, fail("storage driver", d+" (slow, and State Anchor needs overlay)",
			"write ~/.config/containers/storage.conf with [storage] driver=\"overlay\" and [storage.options.overlay] mount_program=\"/usr/bin/fuse-overlayfs\", then `podman system reset`"))
	} else {
		rs = append(rs, pass("storage driver", d))
	}
	return rs
}

func checkImage(ctx context.Context, c *podman.Client, ref string) Result {
	ok, err := c.ImageExists(ctx, ref)
	if err != nil {
		return fail("image "+ref, err.Error(), "fix podman first")
	}
	if !ok {
		return fail("image "+ref, "not built", "lazaret image build")
	}
	return pass("image "+ref, "present")
}

// checkStateModes is the check every sandbox start makes
// (statestore.CheckClosed), for every overlay root under the data root:
// the State Anchor's upper dirs keep agent-made setuid files owned by the
// user, and no other user may reach them. A data root without one yet is
// checked as the first start will find it.
func checkStateModes(dataRoot string) Result {
	const name = "State Anchor modes"
	roots := statestore.OverlayRoots(dataRoot)
	checked := roots
	if len(roots) == 0 {
		checked = []string{filepath.Join(dataRoot, config.DefaultProfileName, "overlay")}
	}
	for _, r := range checked {
		err := statestore.CheckClosed(dataRoot, r)
		var ee *statestore.ExposedError
		switch {
		case errors.As(err, &ee):
			return fail(name, fmt.Sprintf("%s (mode %04o) %s", ee.Dir, ee.Mode&0o7777, ee.Problem), ee.Fix)
		case err != nil:
			return fail(name, err.Error(), "")
		}
	}
	if len(roots) == 0 {
		return pass(name, "no State Anchor under "+dataRoot+" yet; the path to it is closed to other users")
	}
	return pass(name, fmt.Sprintf("the path to each of %d State Anchor roots under %s is closed to other users", len(roots), dataRoot))
}
