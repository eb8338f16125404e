//go:build bench

// Package state benchmarks the State Anchor: many small files written and
// read under a persistent /usr (fuse-overlayfs inside podman unshare,
// bound into the runsc sandbox) against non-persistent dirs of the same
// sandbox, and dpkg -i of a 2,000-file package with and without the
// State Anchor, for both overlay drivers, and on the host (the disk's own
// cost). Run by `make bench` (scripts/bench) as the unprivileged
// user; prints a markdown table for docs/PERFORMANCE.md.
package state

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/overlayfs"
	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/adapter/userns"
	"github.com/lazaret-dev/lazaret/internal/coordinator/stateanchor"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

const (
	nFiles = 2000
	rounds = 5

	tmpfsMagic = 0x01021994 // statfs f_type of tmpfs
)

// workload extracts the tarball into $1, reads every file back, then
// removes the tree, printing the nanoseconds each phase took.
const workload = `set -e
t0=$(date +%s%N)
mkdir -p "$1" && tar -xf /mnt/bench/files.tar -C "$1"
t1=$(date +%s%N)
find "$1" -type f -exec cat {} + >/dev/null
t2=$(date +%s%N)
rm -rf "$1"
t3=$(date +%s%N)
echo $((t1-t0)) $((t2-t1)) $((t3-t2))
`

const dpkgWorkload = `set -e
t0=$(date +%s%N)
dpkg -i /mnt/bench/lzbench.deb >/dev/null
t1=$(date +%s%N)
dpkg -r lzbench >/dev/null
t2=$(date +%s%N)
echo $((t1-t0)) $((t2-t1))
`

// hostDpkgWorkload is dpkgWorkload on the host, no sandbox: dpkg with its
// own root ($1, a dpkg database made there on the first run) on the disk
// that holds the data root, run in podman's user namespace (root there, as
// dpkg wants). dpkg 1.21 fsyncs nothing per file here either: it asks for
// early writeback (sync_file_range, a no-op in gVisor) and fsyncs its own
// database; so this row is the disk's cost of the same file operations.
const hostDpkgWorkload = `set -e
r=$1
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
[ -f "$r/var/lib/dpkg/status" ] || : >"$r/var/lib/dpkg/status"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
t0=$(date +%s%N)
dpkg --log=/dev/null --root="$r" -i /mnt/bench/lzbench.deb >/dev/null
t1=$(date +%s%N)
dpkg --log=/dev/null --root="$r" -r lzbench >/dev/null
t2=$(date +%s%N)
echo $((t1-t0)) $((t2-t1))
`

type sandbox struct {
	name string
	pc   *podman.Client
}

func (s *sandbox) sh(b *testing.B, script string, args ...string) string {
	b.Helper()
	out, err := s.pc.ExecOutput(context.Background(), s.name, append([]string{"sh", "-c", script, "sh"}, args...)...)
	if err != nil {
		b.Fatalf("%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

func BenchmarkStateAnchorSmallFiles(b *testing.B) {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "lzbench-state-")
	if err != nil {
		b.Fatal(err)
	}
	pc := &podman.Client{}
	defer func() {
		_ = overlayfs.New(pc).RemoveAll(ctx, root)
		_ = os.RemoveAll(root)
	}()
	data, plainDir := filepath.Join(root, "bench"), filepath.Join(root, "plain")
	ws, wsFuse, wsMem := filepath.Join(root, "ws"), filepath.Join(root, "ws-fuse"), filepath.Join(root, "ws-mem")
	hostDir := filepath.Join(root, "host")
	for _, d := range []string{data, plainDir, ws, wsFuse, wsMem, hostDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	makeTar(b, filepath.Join(data, "files.tar"))
	makeDeb(b, data)
	rt, err := domain.RuntimeDir()
	if err != nil {
		b.Fatal(err)
	}
	a, err := domain.New("bench", ws, filepath.Join(root, "data"), rt, "")
	if err != nil {
		b.Fatal(err)
	}
	aFuse, err := domain.New("bench", wsFuse, filepath.Join(root, "data"), rt, "")
	if err != nil {
		b.Fatal(err)
	}
	// The same State Anchor with its data root on tmpfs (/dev/shm): it
	// separates what lazaret and gVisor cost from what the disk under the
	// data root costs. Not a configuration to run with: tmpfs does not
	// survive a reboot. (The runtime dir is not necessarily tmpfs: on
	// machines without logind it is a plain dir on disk.)
	memRoot, err := os.MkdirTemp("/dev/shm", "lzbench-state-")
	if err != nil {
		b.Fatal(err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(memRoot, &fs); err != nil || fs.Type != tmpfsMagic {
		b.Fatalf("%s is not on tmpfs (statfs type %#x, %v)", memRoot, fs.Type, err)
	}
	defer func() {
		_ = overlayfs.New(pc).RemoveAll(ctx, memRoot)
		_ = os.RemoveAll(memRoot)
	}()
	aMem, err := domain.New("bench", wsMem, memRoot, rt, "")
	if err != nil {
		b.Fatal(err)
	}
	runsc, err := locate.Find(locate.Runsc)
	if err != nil {
		b.Fatal(err)
	}

	start := func(name string, comp *stateanchor.Component) *sandbox {
		spec := &podman.ContainerSpec{
			Name: name, Image: config.DefaultImage, Runtime: runsc, Network: "none",
			Mounts: []podman.Mount{
				{Type: "bind", Source: data, Target: "/mnt/bench", ReadOnly: true},
				{Type: "bind", Source: plainDir, Target: "/mnt/plain"},
			},
			ExtraArgs: []string{"--runtime-flag", "ignore-cgroups"},
			Command:   []string{"sleep", "infinity"},
		}
		if comp != nil {
			if err := comp.Prepare(ctx, spec); err != nil {
				b.Fatal(err)
			}
		}
		inv, err := pc.RunArgs(spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pc.OutputInvocation(ctx, inv); err != nil {
			b.Fatal(err)
		}
		return &sandbox{name: name, pc: pc}
	}
	stop := func(s *sandbox) { _ = pc.RemoveContainer(ctx, s.name, 0) }

	comp := stateanchor.New(stateanchor.Options{Anchor: a, Image: config.DefaultImage, Dirs: []string{"/usr"}, Podman: pc, Driver: stateanchor.DriverOverlay})
	withSA := start("lazaret-bench-state-sa-"+a.Hash, comp)
	defer func() { stop(withSA); _ = comp.Close(ctx) }()
	compFuse := stateanchor.New(stateanchor.Options{Anchor: aFuse, Image: config.DefaultImage, Dirs: []string{"/usr"}, Podman: pc, Driver: stateanchor.DriverFuse})
	withFuse := start("lazaret-bench-state-fuse-"+aFuse.Hash, compFuse)
	defer func() { stop(withFuse); _ = compFuse.Close(ctx) }()
	compMem := stateanchor.New(stateanchor.Options{Anchor: aMem, Image: config.DefaultImage, Dirs: []string{"/usr"}, Podman: pc, Driver: stateanchor.DriverOverlay})
	withMem := start("lazaret-bench-state-mem-"+aMem.Hash, compMem)
	defer func() { stop(withMem); _ = compMem.Close(ctx) }()
	plain := start("lazaret-bench-state-plain-"+a.Hash, nil)
	defer stop(plain)

	targets := []struct {
		label, dir string
		sb         *sandbox
	}{
		{"persistent /usr, kernel overlay (default)", "/usr/local/lzbench", withSA},
		{"/var/tmp (container rootfs, same sandbox)", "/var/tmp/lzbench", withSA},
		{"/dev/shm (tmpfs, same sandbox)", "/dev/shm/lzbench", withSA},
		{"persistent /usr, fuse-overlayfs (fallback)", "/usr/local/lzbench", withFuse},
		{"plain host dir bind mount (like /workspace)", "/mnt/plain/lzbench", withSA},
		{"persistent /usr, kernel overlay, data root on tmpfs", "/usr/local/lzbench", withMem},
	}
	// The disk's own cost: the same workload run natively on the host, in
	// a dir on the filesystem that holds the default data root.
	const hostLabel = "host, no sandbox, same disk as the data root"
	hostRun := func() []float64 {
		out, err := exec.Command("sh", "-c", strings.ReplaceAll(workload, "/mnt/bench", data), "sh", filepath.Join(hostDir, "lzbench")).Output()
		if err != nil {
			b.Fatalf("host workload: %v", err)
		}
		return parse(b, string(out))
	}
	hostDpkg := func() []float64 {
		out, err := userns.New(pc).Run(ctx, "sh", "-c", strings.ReplaceAll(hostDpkgWorkload, "/mnt/bench", data), "sh", filepath.Join(hostDir, "dpkgroot"))
		if err != nil {
			b.Fatalf("host dpkg workload: %v", err)
		}
		return parse(b, string(out))
	}
	res := map[string][][]float64{}
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for _, t := range targets { // interleaved, so drift hits all alike
			res[t.label] = append(res[t.label], parse(b, t.sb.sh(b, workload, t.dir)))
		}
		res[hostLabel] = append(res[hostLabel], hostRun())
		res["dpkg SA"] = append(res["dpkg SA"], parse(b, withSA.sh(b, dpkgWorkload)))
		res["dpkg fuse"] = append(res["dpkg fuse"], parse(b, withFuse.sh(b, dpkgWorkload)))
		res["dpkg plain"] = append(res["dpkg plain"], parse(b, plain.sh(b, dpkgWorkload)))
		res["dpkg mem"] = append(res["dpkg mem"], parse(b, withMem.sh(b, dpkgWorkload)))
		res["dpkg host"] = append(res["dpkg host"], hostDpkg())
	}
	b.StopTimer()

	fmt.Printf("\n%d files (%d dirs), %d rounds, median wall time inside the runsc sandbox, %s\n\n", nFiles, nFiles/100, rounds, time.Now().UTC().Format("2006-01-02"))
	fmt.Println("| where | extract tar | read all | rm -rf | total | ratio to /var/tmp |")
	fmt.Println("|---|---|---|---|---|---|")
	base := median(res[targets[1].label], -1)
	for _, t := range targets {
		tot := median(res[t.label], -1)
		fmt.Printf("| %s | %s | %s | %s | %s | %.2f |\n", t.label, ms(median(res[t.label], 0)), ms(median(res[t.label], 1)), ms(median(res[t.label], 2)), ms(tot), tot/base)
	}
	host := median(res[hostLabel], -1)
	fmt.Printf("| %s | %s | %s | %s | %s | %.2f |\n", hostLabel, ms(median(res[hostLabel], 0)), ms(median(res[hostLabel], 1)), ms(median(res[hostLabel], 2)), ms(host), host/base)
	dsa, dpl := median(res["dpkg SA"], -1), median(res["dpkg plain"], -1)
	fmt.Println()
	fmt.Println("| dpkg, 2,000-file package | install | remove | total | ratio |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| sandbox without State Anchor | %s | %s | %s | 1.00 |\n", ms(median(res["dpkg plain"], 0)), ms(median(res["dpkg plain"], 1)), ms(dpl))
	fmt.Printf("| persistent /usr, kernel overlay (default) | %s | %s | %s | %.2f |\n", ms(median(res["dpkg SA"], 0)), ms(median(res["dpkg SA"], 1)), ms(dsa), dsa/dpl)
	dfu := median(res["dpkg fuse"], -1)
	fmt.Printf("| persistent /usr, fuse-overlayfs (fallback) | %s | %s | %s | %.2f |\n", ms(median(res["dpkg fuse"], 0)), ms(median(res["dpkg fuse"], 1)), ms(dfu), dfu/dpl)
	dme := median(res["dpkg mem"], -1)
	fmt.Printf("| persistent /usr, kernel overlay, data root on tmpfs | %s | %s | %s | %.2f |\n", ms(median(res["dpkg mem"], 0)), ms(median(res["dpkg mem"], 1)), ms(dme), dme/dpl)
	dho := median(res["dpkg host"], -1)
	fmt.Printf("| host, no sandbox, same disk as the data root (`dpkg --root`) | %s | %s | %s | %.2f |\n", ms(median(res["dpkg host"], 0)), ms(median(res["dpkg host"], 1)), ms(dho), dho/dpl)
	b.ReportMetric(median(res[targets[0].label], -1)/base, "usr/rootfs-ratio")
	b.ReportMetric(dsa/dpl, "dpkg-ratio")
	b.ReportMetric(median(res[targets[3].label], -1)/base, "fuse-usr/rootfs-ratio")
	b.ReportMetric(median(res[targets[5].label], -1)/base, "tmpfs-usr/rootfs-ratio")
	b.ReportMetric(dme/dpl, "tmpfs-dpkg-ratio")
	b.ReportMetric(median(res[targets[0].label], -1)/host, "usr/host-same-disk-ratio")
	b.ReportMetric(dsa/dho, "dpkg-usr/host-same-disk-ratio")
}

// parse reads the space-separated nanosecond figures of one run.
func parse(b *testing.B, out string) []float64 {
	var v []float64
	for _, f := range strings.Fields(out) {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil {
			b.Fatalf("timing %q: %v", out, err)
		}
		v = append(v, n)
	}
	return v
}

// median of phase i of each run (i < 0: of the sums).
func median(runs [][]float64, i int) float64 {
	var xs []float64
	for _, r := range runs {
		if i >= 0 {
			xs = append(xs, r[i])
			continue
		}
		s := 0.0
		for _, x := range r {
			s += x
		}
		xs = append(xs, s)
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func ms(ns float64) string { return fmt.Sprintf("%.0f ms", ns/1e6) }

func makeTar(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for i := 0; i < nFiles; i++ {
		if i%100 == 0 {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: fmt.Sprintf("d%02d/", i/100), Mode: 0o755}); err != nil {
				b.Fatal(err)
			}
		}
		body := []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 40)) // ~300 bytes
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("d%02d/f%04d.txt", i/100, i), Mode: 0o644, Size: int64(len(body))}); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
}

func makeDeb(b *testing.B, dir string) {
	root := filepath.Join(dir, "deb")
	if err := os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte("Package: lzbench\nVersion: 1.0\nArchitecture: all\nMaintainer: bench <b@example.invalid>\nDescription: State Anchor benchmark\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < nFiles; i++ {
		d := filepath.Join(root, "usr", "share", "lzbench", fmt.Sprintf("d%02d", i/100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 40)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, filepath.Join(dir, "lzbench.deb")).CombinedOutput(); err != nil {
		b.Fatalf("dpkg-deb: %v: %s", err, out)
	}
}
