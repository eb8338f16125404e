//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/netns"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/userns"
	"github.com/lazaret-dev/lazaret/internal/cli/statecmd"
	"github.com/lazaret-dev/lazaret/internal/coordinator/stateanchor"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/statestore"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// The State Anchor tests drive the component the way the Session
// Coordinator does (Prepare → podman run → Close), with real rootless
// podman, runsc and fuse-overlayfs.

type saEnv struct {
	t      *testing.T
	env    *Env
	anchor *domain.Anchor
	pc     *podman.Client
	runsc  string
}

func newSAEnv(t *testing.T) *saEnv {
	t.Helper()
	e := NewEnv(t)
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := domain.New("sa-it", e.Workspace, e.DataRoot, rt, "")
	if err != nil {
		t.Fatal(err)
	}
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		t.Fatal(err)
	}
	s := &saEnv{t: t, env: e, anchor: a, pc: &podman.Client{}, runsc: runsc}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.pc.RemoveContainer(ctx, s.container(), 0)
	})
	return s
}

func (s *saEnv) container() string { return "lazaret-stateanchor-it-" + s.anchor.Hash }

func (s *saEnv) component(image string, dirs ...string) *stateanchor.Component {
	return stateanchor.New(stateanchor.Options{Anchor: s.anchor, Image: image, Dirs: dirs, Podman: s.pc})
}

// start prepares comp and starts the sandbox container with its mounts
// plus extra; it registers nothing for cleanup (tests stop explicitly).
func (s *saEnv) start(comp *stateanchor.Component, image string, extra ...podman.Mount) {
	s.t.Helper()
	s.startNet(comp, image, "none", extra...)
}

// startNet is start with a given --network.
func (s *saEnv) startNet(comp *stateanchor.Component, image, network string, extra ...podman.Mount) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := &podman.ContainerSpec{
		Name: s.container(), Image: image, Runtime: s.runsc,
		Labels:    map[string]string{domain.LabelKey: s.anchor.Hash},
		Mounts:    extra,
		Network:   network,
		ExtraArgs: []string{"--runtime-flag", "ignore-cgroups"},
		Command:   []string{"sleep", "infinity"},
	}
	if strings.HasPrefix(network, "ns:") {
		spec.DNS = []string{"127.0.0.1"}
	}
	// Without the coordinator's start gate, the overlays must be mounted
	// before podman runs.
	if err := prepareReady(ctx, comp, spec); err != nil {
		_ = comp.Close(ctx)
		s.t.Fatalf("prepare: %v", err)
	}
	inv, err := s.pc.RunArgs(spec)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.pc.OutputInvocation(ctx, inv); err != nil {
		_ = comp.Close(ctx)
		s.t.Fatalf("podman run: %v", err)
	}
}

func (s *saEnv) stop(comp *stateanchor.Component) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.pc.RemoveContainer(ctx, s.container(), 0); err != nil {
		s.t.Errorf("podman rm: %v", err)
	}
	if err := comp.Close(ctx); err != nil {
		s.t.Errorf("close: %v", err)
	}
}

// prepareReady prepares comp and waits for its overlays (what the
// coordinator's start gate does for a real start).
func prepareReady(ctx context.Context, comp *stateanchor.Component, spec *podman.ContainerSpec) error {
	if err := comp.Prepare(ctx, spec); err != nil {
		return err
	}
	return comp.Ready(ctx)
}

// sh runs script in the sandbox and returns its stdout; a failure fails
// the test.
func (s *saEnv) sh(script string) string {
	s.t.Helper()
	out, err := Podman(s.t, "exec", s.container(), "sh", "-c", script)
	if err != nil {
		s.t.Fatalf("in sandbox %q: %v", script, err)
	}
	return out
}

// unshareSh runs script as root of the rootless user namespace.
func unshareSh(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := Podman(t, append([]string{"unshare", "sh", "-c", script, "sh"}, args...)...)
	if err != nil {
		t.Fatalf("podman unshare %q: %v", script, err)
	}
	return out
}

// domainMounts lists the mount points under the domain's overlay root in
// podman's namespace.
func (s *saEnv) domainMounts() []string {
	s.t.Helper()
	out := unshareSh(s.t, "cat /proc/self/mountinfo")
	ms, err := statestore.ParseMountinfo([]byte(out))
	if err != nil {
		s.t.Fatal(err)
	}
	var res []string
	for _, m := range statestore.MountsUnder(ms, s.overlayRoot()) {
		res = append(res, m.MountPoint)
	}
	return res
}

func (s *saEnv) overlayRoot() string {
	r, err := filepath.EvalSymlinks(filepath.Dir(s.anchor.OverlayDir("/usr")))
	if err != nil {
		return filepath.Dir(s.anchor.OverlayDir("/usr"))
	}
	return r
}

// domainDaemons lists running fuse-overlayfs processes whose mount point
// is under the domain's overlay root.
func (s *saEnv) domainDaemons() []string {
	s.t.Helper()
	var res []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) == "fuse-overlayfs" && strings.HasPrefix(args[len(args)-1], s.overlayRoot()+"/") {
			res = append(res, e.Name()+" "+args[len(args)-1])
		}
	}
	return res
}

// buildDeb builds a small package with dpkg-deb on the host.
func buildDeb(t *testing.T, dir, name string, files int) string {
	t.Helper()
	root := filepath.Join(dir, name+"-root")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755))
	must(os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte(fmt.Sprintf(
		"Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: lazaret tests <t@example.invalid>\nDescription: State Anchor test package\n", name)), 0o644))
	must(os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr", "bin", name), []byte("#!/bin/sh\necho "+name+" works\n"), 0o755))
	for i := 0; i < files; i++ {
		d := filepath.Join(root, "usr", "share", name, fmt.Sprintf("d%02d", i/100))
		must(os.MkdirAll(d, 0o755))
		must(os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644))
	}
	deb := filepath.Join(dir, name+".deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v: %s", err, out)
	}
	return deb
}

func TestStateAnchorPersistsAcrossRestartAndImageUpdate(t *testing.T) {
	s := newSAEnv(t)
	pkgs := filepath.Join(s.env.Root, "pkgs")
	if err := os.MkdirAll(pkgs, 0o755); err != nil {
		t.Fatal(err)
	}
	buildDeb(t, pkgs, "lzsa-pkg", 20)
	pkgMount := podman.Mount{Type: "bind", Source: pkgs, Target: "/mnt/pkgs", ReadOnly: true}
	dirs := []string{"/usr", "/etc", "/var"}

	// 1. First start: write to /usr/local/bin, install a package.
	comp := s.component(config.DefaultImage, dirs...)
	s.start(comp, config.DefaultImage, pkgMount)
	s.sh(`printf '#!/bin/sh\necho tool ok\n' > /usr/local/bin/lzsa-tool && chmod 755 /usr/local/bin/lzsa-tool`)
	s.sh(`dpkg -i /mnt/pkgs/lzsa-pkg.deb >/dev/null`)
	// A deleted image file (a whiteout in usr_changes) stays deleted,
	// also on a new image.
	s.sh(`test -e /usr/bin/yes && rm /usr/bin/yes`)
	if out := s.sh("lzsa-pkg"); !strings.Contains(out, "lzsa-pkg works") {
		t.Fatalf("package binary: %q", out)
	}
	s.stop(comp)
	if ms := s.domainMounts(); len(ms) != 0 {
		t.Fatalf("mounts left after close: %v", ms)
	}

	// The changes are in usr_changes on the host.
	changes, _, _ := s.anchor.OverlayPaths("/usr")
	openOverlayRoot(t, s.overlayRoot(), func() {
		for _, f := range []string{"local/bin/lzsa-tool", "bin/lzsa-pkg", "share/lzsa-pkg/d00/f0000.txt"} {
			if _, err := os.Stat(filepath.Join(changes, f)); err != nil {
				t.Errorf("expected %s in usr_changes: %v", f, err)
			}
		}
	})

	// 2. Second start on the same image: everything is still there.
	comp = s.component(config.DefaultImage, dirs...)
	s.start(comp, config.DefaultImage)
	if out := s.sh("lzsa-tool; lzsa-pkg; dpkg-query -W -f '${Status}' lzsa-pkg"); !strings.Contains(out, "tool ok") ||
		!strings.Contains(out, "lzsa-pkg works") || !strings.Contains(out, "install ok installed") {
		t.Fatalf("after restart: %q", out)
	}
	s.stop(comp)
	rec1, err := statestore.Locate(s.anchor, "").Record("/usr")
	if err != nil || rec1 == nil {
		t.Fatalf("record: %v %v", rec1, err)
	}

	// 3. A rebuilt image with a new file in /usr/share: both the new
	// image's file and the earlier changes are visible.
	tag := fmt.Sprintf("localhost/lazaret-stateanchor-it:%d", time.Now().UnixNano())
	bctx := filepath.Join(s.env.Root, "build")
	if err := os.MkdirAll(bctx, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bctx, "new-file"), []byte("from the new image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bctx, "Containerfile"), []byte("FROM "+config.DefaultImage+"\nCOPY new-file /usr/share/lzsa-new-image-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("podman", "build", "--pull=never", "--network=none", "-q", "-t", tag, bctx).CombinedOutput(); err != nil {
		t.Fatalf("podman build: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = Podman(t, "rmi", "-f", tag) })

	comp = s.component(tag, dirs...)
	s.start(comp, tag)
	out := s.sh("cat /usr/share/lzsa-new-image-file; lzsa-tool; lzsa-pkg; test -e /usr/bin/yes || echo yes-still-deleted")
	for _, want := range []string{"from the new image", "tool ok", "lzsa-pkg works", "yes-still-deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("after image update: missing %q in %q", want, out)
		}
	}
	s.stop(comp)
	rec2, err := statestore.Locate(s.anchor, "").Record("/usr")
	if err != nil || rec2 == nil {
		t.Fatalf("record: %v %v", rec2, err)
	}
	if rec1.Driver != stateanchor.DriverOverlay {
		t.Errorf("new changes dir on Linux >= 5.11: driver %q, want kernel overlay", rec1.Driver)
	}
	if rec2.ImageID == rec1.ImageID || rec2.PreviousImageID != rec1.ImageID || rec2.Image != tag || rec2.Driver != rec1.Driver {
		t.Errorf("record after update = %+v, before = %+v", rec2, rec1)
	}
}

func TestStateAnchorEtcKeepsPodmansResolvConf(t *testing.T) {
	s := newSAEnv(t)
	// Plant resolv.conf, hosts and hostname in the /etc overlay's changes,
	// as an agent could from inside: they must not be what the sandbox sees.
	changes, _, merged := s.anchor.OverlayPaths("/etc")
	if err := os.MkdirAll(changes, 0o755); err != nil {
		t.Fatal(err)
	}
	const planted = "nameserver 203.0.113.7\n"
	plant := func() {
		for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
			unshareSh(t, `rm -f "$1" && printf 'nameserver 203.0.113.7\n' > "$1"`, filepath.Join(changes, f))
		}
	}
	plant()
	// Positive control: without the State Anchor's clean-up a plain
	// fuse-overlayfs over the same changes serves the planted file.
	// The image's root is its one layer's diff dir, as the State Anchor
	// uses it: no podman image mount, so no mount count this test could
	// leave behind.
	ctl := filepath.Join(s.env.Root, "control")
	img, err := s.pc.InspectImage(context.Background(), config.DefaultImage)
	if err != nil {
		t.Fatal(err)
	}
	base, ok := img.SingleLayerDir()
	if !ok {
		t.Fatalf("%s is not a single-layer image: %+v", config.DefaultImage, img.GraphDriver)
	}
	got := unshareSh(t, `mkdir -p "$2/w" "$2/m" && fuse-overlayfs -o "lowerdir=$1/etc,upperdir=$3,workdir=$2/w" "$2/m" </dev/null >/dev/null 2>&1 && cat "$2/m/resolv.conf"; fusermount3 -u "$2/m"`,
		base, ctl, changes)
	if got != planted {
		t.Fatalf("control: a plain overlay serves resolv.conf %q, want the planted one", got)
	}

	check := func(network string) {
		t.Helper()
		for _, f := range []string{"resolv.conf", "hosts", "hostname"} {
			if inside := s.sh("cat /etc/" + f + " 2>/dev/null || true"); strings.Contains(inside, "203.0.113.7") {
				t.Errorf("%s: /etc/%s inside comes from the overlay: %q", network, f, inside)
			}
		}
		if got := unshareSh(t, `cat "$1" 2>/dev/null || true`, filepath.Join(merged, "resolv.conf")); strings.Contains(got, "203.0.113.7") {
			t.Errorf("%s: the overlay still serves the planted resolv.conf", network)
		}
	}

	// With --network none podman binds no resolv.conf: the sandbox must
	// have none rather than the planted one.
	comp := s.component(config.DefaultImage, "/etc")
	s.start(comp, config.DefaultImage)
	check("network none")
	// And /etc is otherwise persistent: a new file lands in etc_changes.
	s.sh("echo kept > /etc/lzsa-etc-file")
	openOverlayRoot(t, s.overlayRoot(), func() {
		if b, err := os.ReadFile(filepath.Join(changes, "lzsa-etc-file")); err != nil || string(b) != "kept\n" {
			t.Errorf("etc_changes/lzsa-etc-file: %q %v", b, err)
		}
	})
	s.stop(comp)

	// With the sidecar's network (the design's layout: a pinned namespace
	// and netd's resolver), resolv.conf is podman's.
	plant()
	pin := filepath.Join(filepath.Dir(s.anchor.Netns()), "lzsa-it-netns-"+s.anchor.Hash)
	if err := netns.New(s.pc).Create(context.Background(), pin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.New(s.pc).Remove(context.Background(), pin) })
	comp = s.component(config.DefaultImage, "/etc")
	s.startNet(comp, config.DefaultImage, "ns:"+pin)
	defer s.stop(comp)
	check("network namespace")
	path, err := Podman(t, "inspect", "--format", "{{.ResolvConfPath}}", s.container())
	if err != nil || strings.TrimSpace(path) == "" {
		t.Fatalf("podman's resolv.conf path: %q %v", path, err)
	}
	want, err := os.ReadFile(strings.TrimSpace(path))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.sh("cat /etc/resolv.conf"); got != string(want) {
		t.Errorf("/etc/resolv.conf inside = %q, podman's = %q", got, want)
	}
	if got := s.sh("cat /etc/lzsa-etc-file"); got != "kept\n" {
		t.Errorf("/etc change not kept: %q", got)
	}
}

// holderEnv carries the anchor of the holding process of the crash test.
const holderEnv = "LAZARET_SA_HOLDER"

// TestStateAnchorHolder is not a test: it is the process the crash test
// SIGKILLs while it holds the State Anchor mounted (the stand-in for a
// coordinator until the coordinator exists). It does nothing unless
// LAZARET_SA_HOLDER is set.
func TestStateAnchorHolder(t *testing.T) {
	spec := os.Getenv(holderEnv)
	if spec == "" {
		t.Skip("helper process for TestStateAnchorCrashRecovery")
	}
	var h struct {
		Anchor domain.Anchor
		Driver string
	}
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		t.Fatal(err)
	}
	comp := stateanchor.New(stateanchor.Options{Anchor: &h.Anchor, Image: config.DefaultImage, Dirs: []string{"/usr", "/var"}, Podman: &podman.Client{}, Driver: h.Driver})
	if err := prepareReady(context.Background(), comp, &podman.ContainerSpec{}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("mounted")
	time.Sleep(10 * time.Minute)
}

func TestStateAnchorCrashRecovery(t *testing.T) {
	for _, driver := range []string{stateanchor.DriverFuse, stateanchor.DriverOverlay} {
		t.Run(driver, func(t *testing.T) { testCrashRecovery(t, driver) })
	}
}

func testCrashRecovery(t *testing.T, driver string) {
	s := newSAEnv(t)
	// Another domain's overlay, mounted throughout: the sweep must not
	// touch it.
	other := newSAEnv(t)
	otherComp := stateanchor.New(stateanchor.Options{Anchor: other.anchor, Image: config.DefaultImage, Dirs: []string{"/opt/other"}, Podman: other.pc, Driver: driver})
	if err := prepareReady(context.Background(), otherComp, &podman.ContainerSpec{}); err != nil {
		t.Fatal(err)
	}
	defer otherComp.Close(context.Background())

	h, _ := json.Marshal(map[string]any{"Anchor": s.anchor, "Driver": driver})
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateAnchorHolder$", "-test.v")
	cmd.Env = append(os.Environ(), holderEnv+"="+string(h))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		if sc.Text() == "mounted" {
			ready = true
			break
		}
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("holder did not mount")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	wantDaemons := 0
	if driver == stateanchor.DriverFuse {
		wantDaemons = 2
	}
	// Control: the crash really left mounts (and daemons) behind.
	if ms := s.domainMounts(); len(ms) != 2 {
		t.Fatalf("control: want 2 stale mounts after SIGKILL, have %v", ms)
	}
	if ds := s.domainDaemons(); len(ds) != wantDaemons {
		t.Fatalf("control: want %d stale fuse-overlayfs after SIGKILL, have %v", wantDaemons, ds)
	}
	if wantDaemons > 0 {
		// Kill one daemon too, as a crash of the whole session would: its
		// mount is then dead (ENOTCONN) and must still be swept.
		var pid int
		fmt.Sscanf(s.domainDaemons()[0], "%d", &pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}

	// A new start sweeps them and mounts fresh ones.
	comp := s.component(config.DefaultImage, "/usr", "/var")
	s.start(comp, config.DefaultImage)
	if ms := s.domainMounts(); len(ms) != 2 {
		t.Errorf("after new start: want exactly the 2 new mounts, have %v", ms)
	}
	if ds := s.domainDaemons(); len(ds) != wantDaemons {
		t.Errorf("after new start: want exactly %d new daemons, have %v", wantDaemons, ds)
	}
	if out := s.sh("ls /usr/bin/dpkg /var/lib/dpkg/status"); !strings.Contains(out, "status") {
		t.Errorf("sandbox after recovery: %q", out)
	}
	s.stop(comp)
	if ms := s.domainMounts(); len(ms) != 0 {
		t.Errorf("after close: mounts left %v", ms)
	}
	Eventually(t, 10*time.Second, "no fuse-overlayfs of the domain", func() bool { return len(s.domainDaemons()) == 0 })
	// The other domain's overlay is untouched.
	if ms := other.domainMounts(); len(ms) != 1 {
		t.Errorf("other domain's mounts: %v", ms)
	}
	if ds := other.domainDaemons(); len(ds) != wantDaemons/2 {
		t.Errorf("other domain's daemons: %v", ds)
	}
}

func TestStateAnchorStateCommands(t *testing.T) {
	s := newSAEnv(t)
	s.env.WriteConfig("[profiles.sa-it]\nimage = \"" + config.DefaultImage + "\"\npersistent_dirs = [\"/usr\", \"/opt/sa\"]\npersist_package_db = false\npersist = \"workspace\"\n")
	comp := s.component(config.DefaultImage, "/usr", "/opt/sa")
	s.start(comp, config.DefaultImage)
	// A file owned by a sub-uid: deleting it needs podman unshare.
	s.sh("head -c 100000 /dev/zero > /usr/local/lzsa-blob && chown 1234:1234 /usr/local/lzsa-blob && echo x > /opt/sa/f")

	out := s.env.MustRun("state", "sa-it")
	if !strings.Contains(out, "/usr") || !strings.Contains(out, "/opt/sa") || !strings.Contains(out, "yes") {
		t.Errorf("state while running: %s", out)
	}
	// Refused while the sandbox runs, even with --yes.
	if r := s.env.Run("state", "reset", "sa-it", "/usr", "--yes"); r.Code == 0 || !strings.Contains(r.Stderr, "in use") {
		t.Errorf("reset while running: exit %d, %s", r.Code, r.Stderr)
	}
	s.stop(comp)

	var st struct {
		Dirs []statecmd.DirState `json:"dirs"`
	}
	if err := json.Unmarshal([]byte(s.env.MustRun("state", "sa-it", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Dirs) != 2 || st.Dirs[0].Bytes < 100000 || st.Dirs[0].Mounted || st.Dirs[0].Record == nil || st.Dirs[0].Record.ImageID == "" {
		t.Fatalf("state --json after stop: %+v", st.Dirs)
	}
	// lazaret status shows which image each overlay was last used with.
	var status struct {
		Persistent []statestore.Record `json:"persistent"`
	}
	if err := json.Unmarshal([]byte(s.env.MustRun("status", "sa-it", "--json")), &status); err != nil {
		t.Fatal(err)
	}
	if len(status.Persistent) != 2 || status.Persistent[0].ImageID != st.Dirs[0].Record.ImageID || status.Persistent[0].Image != config.DefaultImage {
		t.Errorf("status --json persistent = %+v, want the records of /usr and /opt/sa", status.Persistent)
	}
	if out := s.env.MustRun("status", "sa-it"); !strings.Contains(out, "PERSISTENT") || !strings.Contains(out, st.Dirs[0].Record.ImageID[:12]) {
		t.Errorf("status does not show the overlay's image:\n%s", out)
	}
	// Without a terminal, --yes is required.
	if r := s.env.Run("state", "reset", "sa-it", "/usr"); r.Code != 2 {
		t.Errorf("reset without --yes: exit %d, %s", r.Code, r.Stderr)
	}
	changes, _, _ := s.anchor.OverlayPaths("/usr")
	openOverlayRoot(t, s.overlayRoot(), func() {
		if _, err := os.Stat(filepath.Join(changes, "local", "lzsa-blob")); err != nil {
			t.Fatalf("changes gone before reset: %v", err)
		}
	})
	s.env.MustRun("state", "reset", "sa-it", "/usr", "--yes")
	optChanges, _, _ := s.anchor.OverlayPaths("/opt/sa")
	openOverlayRoot(t, s.overlayRoot(), func() {
		if _, err := os.Stat(filepath.Join(changes, "local", "lzsa-blob")); !os.IsNotExist(err) {
			t.Errorf("usr changes after reset: %v", err)
		}
		if _, err := os.Stat(filepath.Join(optChanges, "f")); err != nil {
			t.Errorf("/opt/sa changes must survive a reset of /usr: %v", err)
		}
	})
	// The next start sees the image's /usr again, and /opt/sa's change.
	comp = s.component(config.DefaultImage, "/usr", "/opt/sa")
	s.start(comp, config.DefaultImage)
	defer s.stop(comp)
	if out := s.sh("ls /usr/local/lzsa-blob 2>&1; cat /opt/sa/f"); !strings.Contains(out, "No such file") || !strings.Contains(out, "x") {
		t.Errorf("after reset: %q", out)
	}
}

// saCLIEnv is an Env whose profile sa-e2e persists /usr and /etc, driven
// through the lazaret CLI and its coordinator.
func saCLIEnv(t *testing.T) (*Env, *saEnv) {
	e := NewEnv(t)
	e.WriteConfig("[profiles.sa-e2e]\nimage = \"" + config.DefaultImage + "\"\npersistent_dirs = [\"/usr\", \"/etc\"]\npersist = \"workspace\"\n")
	d := domainOf(t, e, "sa-e2e")
	root := d.Resources["domain_root"]
	a := &domain.Anchor{Profile: "sa-e2e", Hash: d.Hash, DataRoot: filepath.Dir(filepath.Dir(root))}
	if a.Root() != root {
		t.Fatalf("domain root %s, derived %s", root, a.Root())
	}
	return e, &saEnv{t: t, env: e, anchor: a, pc: &podman.Client{}}
}

func TestStateAnchorLazaretExec(t *testing.T) {
	e, s := saCLIEnv(t)
	buildDeb(t, e.Workspace, "lzsa-pkg", 20)
	// A resolv.conf planted in the /etc overlay must not reach the sandbox.
	// (A changes dir that exists without a record is mounted with
	// fuse-overlayfs, so this test runs both drivers: /usr kernel, /etc FUSE.)
	etcChanges, _, _ := s.anchor.OverlayPaths("/etc")
	if err := os.MkdirAll(etcChanges, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etcChanges, "resolv.conf"), []byte("nameserver 203.0.113.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	e.MustRun("exec", "sa-e2e", "--", "sh", "-c",
		`printf '#!/bin/sh\necho tool ok\n' > /usr/local/bin/lzsa-tool && chmod 755 /usr/local/bin/lzsa-tool && dpkg -i /workspace/lzsa-pkg.deb >/dev/null`)
	// The session ended: the coordinator tore down and unmounted.
	Eventually(t, 10*time.Second, "overlays unmounted at teardown", func() bool { return len(s.domainMounts()) == 0 })
	changes, _, _ := s.anchor.OverlayPaths("/usr")
	openOverlayRoot(t, s.overlayRoot(), func() {
		for _, f := range []string{"local/bin/lzsa-tool", "bin/lzsa-pkg"} {
			if _, err := os.Stat(filepath.Join(changes, f)); err != nil {
				t.Errorf("expected %s in usr_changes: %v", f, err)
			}
		}
	})
	out := e.MustRun("exec", "sa-e2e", "--", "sh", "-c", "lzsa-tool; lzsa-pkg; dpkg-query -W -f '${Status}\n' lzsa-pkg 2>&1; cat /etc/resolv.conf")
	for _, want := range []string{"tool ok", "lzsa-pkg works", "nameserver"} {
		if !strings.Contains(out, want) {
			t.Errorf("second exec: missing %q in %q", want, out)
		}
	}
	if strings.Contains(out, "203.0.113.7") {
		t.Errorf("the planted resolv.conf reached the sandbox: %q", out)
	}
	for dir, want := range map[string]string{"/usr": stateanchor.DriverOverlay, "/etc": stateanchor.DriverFuse} {
		if rec, err := statestore.Locate(s.anchor, "").Record(dir); err != nil || rec == nil || rec.Driver != want {
			t.Errorf("%s record: %+v %v, want driver %s", dir, rec, err, want)
		}
	}
	if st := e.MustRun("state", "sa-e2e"); !strings.Contains(st, "/usr") || !strings.Contains(st, "/etc") || !strings.Contains(st, config.DefaultImage) {
		t.Errorf("lazaret state: %s", st)
	}
}

// TestStateAnchorKilledCoordinator: SIGKILL of the coordinator while the
// overlays are mounted; the next start leaves no stale mount or
// fuse-overlayfs process of the domain.
func TestStateAnchorKilledCoordinator(t *testing.T) {
	e, s := saCLIEnv(t)
	a, _ := background(t, e, nil, "exec", "sa-e2e", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "session", func() bool { return saSessions(t, e) == 1 })
	// /usr and /etc, and the package database /usr brings with it
	// (/var/lib/dpkg, /var/lib/apt).
	const want = 4
	before := s.domainMounts()
	if len(before) != want {
		t.Fatalf("want %d overlay mounts while running, have %v", want, before)
	}
	var st lcStatus
	if err := json.Unmarshal([]byte(e.MustRun("status", "sa-e2e", "--json")), &st); err != nil || st.Status == nil {
		t.Fatalf("status: %v", err)
	}
	if err := syscall.Kill(st.Status.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	// Control: the kill left the mounts behind.
	if ms := s.domainMounts(); len(ms) != want {
		t.Fatalf("control: want the %d mounts left by the killed coordinator, have %v", want, ms)
	}
	b, _ := background(t, e, nil, "exec", "sa-e2e", "--", "sleep", "600")
	Eventually(t, 2*time.Minute, "new session", func() bool { return saSessions(t, e) == 1 })
	if ms := s.domainMounts(); len(ms) != want {
		t.Errorf("after recovery: want exactly %d mounts, have %v", want, ms)
	}
	if ds := s.domainDaemons(); len(ds) != 0 {
		t.Errorf("after recovery: fuse-overlayfs daemons of the domain: %v", ds)
	}
	e.MustRun("stop", "sa-e2e")
	_ = b.Wait()
	Eventually(t, 10*time.Second, "no mounts after stop", func() bool { return len(s.domainMounts()) == 0 })
}

func saSessions(t *testing.T, e *Env) int {
	t.Helper()
	var st lcStatus
	if err := json.Unmarshal([]byte(e.MustRun("status", "sa-e2e", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Status == nil {
		return -1
	}
	return len(st.Status.Sessions)
}

// containers/storage can count a mount of a layer whose mount point is
// gone (the count outlived the mount, then the overlay driver's own unmount
// removed the dir); podman then refuses every image mount of it. CI met
// this once. ImageMount recreates the mount point and mounts again.
func TestImageMountRecoversALostMountPoint(t *testing.T) {
	pc := &podman.Client{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mp := unshareSh(t, `podman image mount "$1"`, config.DefaultImage)
	t.Cleanup(func() { _, _ = Podman(t, "unshare", "podman", "image", "unmount", "--force", config.DefaultImage) })
	mp = strings.TrimSpace(mp)
	if filepath.Base(mp) != "merged" {
		t.Fatalf("podman image mount = %q, want a layer's merged dir", mp)
	}
	// Lose the mount and its mount point while podman still counts it.
	unshareSh(t, `umount "$1" && rmdir "$1"`, mp)
	// Positive control: podman itself now refuses.
	if out, err := Podman(t, "unshare", "podman", "image", "mount", config.DefaultImage); err == nil || !strings.Contains(err.Error()+out, "no such file or directory") {
		t.Fatalf("control: podman image mount after losing the mount point: %v %q, want the lstat error", err, out)
	}
	dir, err := pc.ImageMount(ctx, config.DefaultImage)
	if err != nil {
		t.Fatalf("ImageMount: %v", err)
	}
	if dir != mp {
		t.Errorf("ImageMount = %q, want %q", dir, mp)
	}
	if out := unshareSh(t, `cat "$1/etc/debian_version"`, dir); strings.TrimSpace(out) == "" {
		t.Error("the recovered image mount shows no /etc/debian_version")
	}
}

// podman.Client.Mountinfo reads the pause process's mount table instead of
// starting `cat` in podman's namespace: the same table, a mount made in
// that namespace included; the control is the test's own table, which does
// not have it (what reading the wrong namespace would give).
func TestMountinfoIsPodmansNamespace(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	unshareSh(t, `mount -t tmpfs lazaret-mountinfo-test "$1"`, dir)
	t.Cleanup(func() { unshareSh(t, `umount "$1"`, dir) })
	has := func(table []byte) bool {
		ms, err := statestore.ParseMountinfo(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.MountPoint == dir {
				return true
			}
		}
		return false
	}
	got, err := userns.New(&podman.Client{}).Mountinfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !has(got) {
		t.Errorf("Mountinfo lacks the tmpfs mounted on %s in podman's namespace", dir)
	}
	if !has([]byte(unshareSh(t, "cat /proc/self/mountinfo"))) {
		t.Fatal("podman unshare's own table lacks the tmpfs")
	}
	own, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if has(own) {
		t.Fatal("control: the test's own mount table shows the tmpfs; the check above proves nothing")
	}
}
