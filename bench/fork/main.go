// Command fork benchmarks `lazaret fork` (issue #37) when the parent's
// /usr changes hold 1 GiB (1,000 files of 1 MiB and 3 of 8 MiB, written
// by the agent), against the bare copy of the same tree as root of
// podman's user namespace, in the same run:
//
//   - the fork's wall time, for a stopped parent and for a running one
//     (a `lazaret exec -- sleep` holding it; its coordinator pauses the
//     sandbox for the copy: the pause it prints is reported too), against
//     `podman unshare cp -a [--reflink=always]` of the parent's /usr
//     changes dir into the same file system;
//   - the copy's writeback: the syncfs right after it (the times above
//     end with the copy in the page cache);
//   - the disk each attempt takes: the file system's used blocks (statfs,
//     after a syncfs) before and after the fork, and du's allocated
//     blocks of the place (data root, workspace) before and after (du
//     counts a block shared by reflinks once per file: it shows what a
//     copy would take);
//
// once where the data root's file system makes reflinks (FORK_REFLINK_DIR,
// a dir of a loop-mounted XFS that scripts/bench makes; the rows are
// skipped without it) and once on /var/tmp (ext4 here: a plain copy).
// Between rounds `lazaret attempts rm` removes the attempt and the bare
// copy is removed, neither timed.
//
// It runs as the unprivileged podman user with LAZARET_BIN naming the
// built binaries (scripts/bench). FORK_N sets the rounds of each kind
// (default 5: about 30 s on XFS and 65 s on ext4 on the project's VM).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	smallFiles = 1000 // of 1 MiB
	bigFiles   = 3    // of 8 MiB
	treeBytes  = (smallFiles + 8*bigFiles) << 20
)

// fillScript writes the 1 GiB into the agent's persistent /usr: $1 files
// of 1 MiB and $2 of 8 MiB from /dev/urandom, in 1 MiB reads and writes
// (perl-base is in every Debian image). head -c and split copy in small
// blocks, each a system call the Sentry serves: in gVisor they write
// 7-30 MB/s, and the fill alone took 2-3 minutes.
const fillScript = `set -e
d=/usr/local/share/lzbench
mkdir -p $d/small $d/big
exec perl -e '
open(my $r, "<", "/dev/urandom") or die "urandom: $!";
sub fill {
  my ($path, $mib) = @_;
  open(my $o, ">", $path) or die "$path: $!";
  for (1 .. $mib) {
    sysread($r, my $b, 1 << 20) == 1 << 20 or die "urandom: short read";
    syswrite($o, $b) == 1 << 20 or die "$path: $!";
  }
  close($o) or die "$path: $!";
}
fill(sprintf("%s/small/f%04d", $ARGV[0], $_), 1) for 1 .. $ARGV[1];
fill("$ARGV[0]/big/b$_", 8) for 1 .. $ARGV[2];
' "$d" "$1" "$2"
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/fork:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		return errors.New("LAZARET_BIN is not set")
	}
	n := 5
	if v, err := strconv.Atoi(os.Getenv("FORK_N")); err == nil && v > 0 {
		n = v
	}
	var res []*results
	if dir := os.Getenv("FORK_REFLINK_DIR"); dir != "" {
		r, err := measure(bin, dir, true, n)
		if err != nil {
			return fmt.Errorf("reflink rows (%s): %w", dir, err)
		}
		res = append(res, r)
	} else {
		fmt.Fprintln(os.Stderr, "bench/fork: FORK_REFLINK_DIR is not set (scripts/bench makes a loop-mounted XFS for it): no reflink rows")
	}
	r, err := measure(bin, "/var/tmp", false, n)
	if err != nil {
		return fmt.Errorf("plain copy rows (/var/tmp): %w", err)
	}
	res = append(res, r)
	report(n, res)
	return nil
}

// place is one data root and its workspace.
type place struct {
	bin, root, config, ws, data string
	reflink                     bool
	fs                          string // the file system's name
	// layer is the profile's layer of /usr: the parent's changes, what
	// the bare baseline copies.
	layer string
}

// results are one place's measurements.
type results struct {
	fs                      string   // the data root's file system
	mode                    []string // the copy modes the forks printed
	fill                    time.Duration
	bare, stopped, running  []time.Duration
	paused                  []time.Duration
	bareSync, forkSync      []time.Duration // the syncfs right after each copy
	bareDisk, forkDisk      []int64         // statfs used-blocks deltas
	bareDu, forkDu          []int64         // du deltas
	notPaused               int             // running-parent forks that printed no pause
	reflink                 bool
	layerBytes, layerBlocks int64
}

func (p *place) lazaret(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, "lazaret"), append([]string{"--config", p.config}, args...)...)
	cmd.Dir = p.ws
	return cmd
}

// output runs cmd, returning its stdout and, on failure, an error naming
// the command with its stderr.
func output(cmd *exec.Cmd) (string, error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %v: %s%s", strings.Join(cmd.Args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

func timed(cmd *exec.Cmd) (string, time.Duration, error) {
	start := time.Now()
	out, err := output(cmd)
	return out, time.Since(start), err
}

func unshare(args ...string) *exec.Cmd {
	return exec.Command("podman", append([]string{"unshare"}, args...)...)
}

func measure(bin, under string, reflink bool, n int) (_ *results, err error) {
	began := time.Now()
	root, err := os.MkdirTemp(under, "lazaret-bench-fork-")
	if err != nil {
		return nil, err
	}
	p := &place{bin: bin, root: root, config: filepath.Join(root, "config.toml"), ws: filepath.Join(root, "ws"),
		data: filepath.Join(root, "data"), reflink: reflink}
	// The profile's layer of /usr (persist = "profile", the default):
	// statestore.ProfileLayer(<data_root>/<profile>/overlay, "/usr").
	p.layer = filepath.Join(p.data, "default", "overlay", "usr", "usr_changes")
	defer func() {
		_ = p.lazaret("stop", "--all").Run()
		// The copies hold the sandbox's sub-uids' files.
		_ = unshare("rm", "-rf", root).Run()
		_ = os.RemoveAll(root)
		fmt.Fprintf(os.Stderr, "bench/fork: the rows on %s took %s\n", p.fs, time.Since(began).Round(time.Second))
	}()
	if p.fs, err = fsName(root); err != nil {
		return nil, err
	}
	if err := p.setup(); err != nil {
		return nil, err
	}
	r := &results{reflink: reflink, fs: p.fs}
	// The parent's 1 GiB, folded into the profile's layer at its stop.
	var d time.Duration
	if _, d, err = timed(p.lazaret("exec", "--", "sh", "-c", fillScript, "sh", strconv.Itoa(smallFiles), strconv.Itoa(bigFiles))); err != nil {
		return nil, err
	}
	r.fill = d
	if _, err := output(p.lazaret("stop")); err != nil {
		return nil, err
	}
	if r.layerBytes, err = du(p.layer, true); err != nil {
		return nil, err
	}
	if r.layerBlocks, err = du(p.layer, false); err != nil {
		return nil, err
	}
	if r.layerBytes < treeBytes {
		return nil, fmt.Errorf("the profile's layer %s holds %d bytes after the parent's stop, not the %d written (the layout changed?)", p.layer, r.layerBytes, treeBytes)
	}
	// Stopped parent.
	for i := range n {
		if err := p.bareRound(r); err != nil {
			return nil, err
		}
		if err := p.forkRound(r, fmt.Sprintf("s%d", i+1), false); err != nil {
			return nil, err
		}
	}
	// Running parent: a session holds it.
	holder := p.lazaret("exec", "--", "sleep", "3600")
	if err := holder.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if err := p.waitSession(); err != nil {
		return nil, err
	}
	for i := range n {
		if err := p.bareRound(r); err != nil {
			return nil, err
		}
		if err := p.forkRound(r, fmt.Sprintf("r%d", i+1), true); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// setup makes the workspace a git repository with one commit (fork needs
// branch mode) and the config naming the place's data root.
func (p *place) setup() error {
	if err := os.MkdirAll(p.ws, 0o755); err != nil {
		return err
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = p.ws
		_, err := output(cmd)
		return err
	}
	if err := os.WriteFile(filepath.Join(p.ws, "README"), []byte("bench/fork\n"), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "README"}, {"commit", "-q", "-m", "bench/fork"}} {
		if err := git(args...); err != nil {
			return err
		}
	}
	return os.WriteFile(p.config, fmt.Appendf(nil, "data_root = %q\n", p.data), 0o600)
}

// waitSession waits until the holding session has attached.
func (p *place) waitSession() error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var st struct {
			Status *struct {
				Sessions []json.RawMessage `json:"sessions"`
			} `json:"status"`
		}
		if out, err := p.lazaret("status", "--json").Output(); err == nil && json.Unmarshal(out, &st) == nil &&
			st.Status != nil && len(st.Status.Sessions) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the holding session did not attach within 2 minutes")
}

// bareRound times the bare copy of the parent's /usr layer into the same
// file system, measures what it takes and removes it.
func (p *place) bareRound(r *results) error {
	dst := filepath.Join(p.root, "bare-copy")
	args := []string{"cp", "-a"}
	if p.reflink {
		args = append(args, "--reflink=always")
	}
	args = append(args, p.layer, dst)
	used, blocks, _, err := p.usage()
	if err != nil {
		return err
	}
	_, d, err := timed(unshare(args...))
	if err != nil {
		return err
	}
	used2, blocks2, synced, err := p.usage()
	if err != nil {
		return err
	}
	r.bare = append(r.bare, d)
	r.bareSync = append(r.bareSync, synced)
	r.bareDisk = append(r.bareDisk, used2-used)
	r.bareDu = append(r.bareDu, blocks2-blocks)
	_, err = output(unshare("rm", "-rf", dst))
	return err
}

var (
	modeRe   = regexp.MustCompile(`persistent dirs copied \((\w+),`)
	pausedRe = regexp.MustCompile(`paused (\d+) ms`)
)

// forkRound times `lazaret fork name`, measures what the attempt takes
// and removes it.
func (p *place) forkRound(r *results, name string, running bool) error {
	used, blocks, _, err := p.usage()
	if err != nil {
		return err
	}
	out, d, err := timed(p.lazaret("fork", name))
	if err != nil {
		return err
	}
	used2, blocks2, synced, err := p.usage()
	if err != nil {
		return err
	}
	r.forkSync = append(r.forkSync, synced)
	m := modeRe.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("fork %s: no copy mode in its output: %q", name, out)
	}
	if !slices.Contains(r.mode, m[1]) {
		r.mode = append(r.mode, m[1])
	}
	if running {
		// No pause printed: the coordinator could not pause the sandbox
		// and copied while it ran (its log says so).
		if pm := pausedRe.FindStringSubmatch(out); pm != nil {
			ms, _ := strconv.Atoi(pm[1])
			r.paused = append(r.paused, time.Duration(ms)*time.Millisecond)
		} else {
			r.notPaused++
		}
		r.running = append(r.running, d)
	} else {
		r.stopped = append(r.stopped, d)
	}
	r.forkDisk = append(r.forkDisk, used2-used)
	r.forkDu = append(r.forkDu, blocks2-blocks)
	_, err = output(p.lazaret("attempts", "rm", name))
	return err
}

// usage returns the bytes the file system of the place has in use
// (statfs, after a syncfs, so that what is in flight is counted), du's
// allocated bytes of the place's root, and how long the syncfs took (after
// a copy: its writeback, which the copy's own time does not hold).
func (p *place) usage() (used, blocks int64, synced time.Duration, err error) {
	fd, err := unix.Open(p.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer unix.Close(fd)
	start := time.Now()
	if err := unix.Syncfs(fd); err != nil {
		return 0, 0, 0, err
	}
	synced = time.Since(start)
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return 0, 0, 0, err
	}
	used = int64(st.Blocks-st.Bfree) * st.Bsize
	blocks, err = du(p.root, false)
	return used, blocks, synced, err
}

// du is du -s of path as root of podman's user namespace (the layers hold
// the sandbox's sub-uids' files, under vaults): allocated bytes, or the
// apparent size.
func du(path string, apparent bool) (int64, error) {
	args := []string{"du", "-s", "-B1"}
	if apparent {
		args = append(args, "--apparent-size")
	}
	out, err := output(unshare(append(args, path)...))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, fmt.Errorf("du %s: %q", path, out)
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// fsName names the file system of path.
func fsName(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", err
	}
	switch st.Type {
	case unix.XFS_SUPER_MAGIC:
		return "XFS", nil
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs", nil
	case unix.EXT4_SUPER_MAGIC:
		return "ext4", nil
	case unix.TMPFS_MAGIC:
		return "tmpfs", nil
	}
	return fmt.Sprintf("statfs type %#x", st.Type), nil
}

func median[T time.Duration | int64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
func ms(d time.Duration) string   { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func size(n int64) string {
	switch a := max(n, -n); {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
}

func ratio[T time.Duration | int64](a, b T) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// report prints the medians as PERFORMANCE.md's table.
func report(n int, res []*results) {
	fmt.Printf("\n### Fork (1 GiB in the parent's /usr: %d files of 1 MiB and %d of 8 MiB; median of %d per row, the bare copies of %d; %s)\n\n",
		smallFiles, bigFiles, n, 2*n, time.Now().UTC().Format("2006-01-02 15:04"))
	fmt.Println("| measurement | lazaret | bare baseline | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range res {
		kind, cp, goal := "plain copy", "`podman unshare cp -a`", ""
		if r.reflink {
			kind, cp, goal = "reflink", "`podman unshare cp -a --reflink=always`", "< 2 s"
		}
		where := fmt.Sprintf("%s, data root on %s; the fork said %q", kind, r.fs, strings.Join(r.mode, ", "))
		bare := median(r.bare)
		fmt.Printf("| `fork`, stopped parent (%s) | %s | %s %s | %s | %s |\n", where, secs(median(r.stopped)), cp, secs(bare), ratio(median(r.stopped), bare), goal)
		fmt.Printf("| `fork`, running parent (%s) | %s | %s %s | %s | %s |\n", where, secs(median(r.running)), cp, secs(bare), ratio(median(r.running), bare), goal)
		if len(r.paused) > 0 {
			fmt.Printf("| the running parent's pause (%s), as the fork printed it | %s | %s %s | %s | |\n", kind, ms(median(r.paused)), cp, secs(bare), ratio(median(r.paused), bare))
		}
		if r.notPaused > 0 {
			fmt.Printf("| running-parent forks that printed no pause (%s: copied while the sandbox ran) | %d of %d | | | |\n", kind, r.notPaused, len(r.running))
		}
		fmt.Printf("| the copy's writeback (%s): a syncfs right after it, not in the times above | %s | %s | %s | |\n", kind, ms(median(r.forkSync)), ms(median(r.bareSync)), ratio(median(r.forkSync), median(r.bareSync)))
		fmt.Printf("| disk used per attempt (%s): the file system's used blocks (statfs) after − before | %s | %s | %s | |\n", kind, size(median(r.forkDisk)), size(median(r.bareDisk)), ratio(median(r.forkDisk), median(r.bareDisk)))
		fmt.Printf("| du per attempt (%s): allocated blocks after − before (a shared block counted per file) | %s | %s | %s | |\n", kind, size(median(r.forkDu)), size(median(r.bareDu)), ratio(median(r.forkDu), median(r.bareDu)))
	}
	fmt.Println()
	for _, r := range res {
		fmt.Printf("On %s: the parent's /usr layer %s apparent, %s allocated; the fill (a cold `lazaret exec` writing 1 GiB from /dev/urandom) %s.\n",
			r.fs, size(r.layerBytes), size(r.layerBlocks), secs(r.fill))
	}
}
