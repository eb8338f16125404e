package escclient

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// OOMKillVerb selects the sandbox's OOM killer: the coordinator runs
// `lazaret-escalate-go __oomkill` with runsc exec when the sandbox's memory
// reaches its limit (internal/coordinator/limits), as a VM's kernel kills a
// process when its memory runs out. It kills the process with the largest
// resident memory, never PID 1 (the container's init) nor itself, and
// prints one line: "killed PID RSS_BYTES COMM" (RSS_BYTES "?" for a busy
// process whose size could not be read), or "none" when there was
// nothing to kill. The coordinator reads that line as hostile text.
const OOMKillVerb = "__oomkill"

// OOMKillServe is OOMKillVerb's flag for its resident mode: the
// coordinator starts it once per sandbox and writes one byte to its
// standard input per kill; it answers each with the line OOMKillMain
// prints, and exits at end of input. A kill then costs no process start
// in the sandbox (a runsc exec of a Go program takes longer than a fast
// allocation needs to pass the limit's margin).
const OOMKillServe = "--serve"

// OOMKillServeMain is the resident mode: one kill per byte read from in.
func OOMKillServeMain(procRoot string, in io.Reader, stdout, stderr io.Writer) int {
	buf := make([]byte, 1)
	for {
		if _, err := in.Read(buf); err != nil {
			return 0
		}
		if OOMKillMain(procRoot, stdout, stderr) != 0 {
			fmt.Fprintln(stdout, "error")
		}
	}
}

// OOMKillMain scans procRoot ("/proc") and kills the largest process.
func OOMKillMain(procRoot string, stdout, stderr io.Writer) int {
	v, err := pickVictim(procRoot, os.Getpid())
	if err != nil {
		fmt.Fprintf(stderr, "lazaret-escalate-go %s: %v\n", OOMKillVerb, err)
		return 1
	}
	if v.pid == 0 {
		fmt.Fprintln(stdout, "none")
		return 0
	}
	if err := syscall.Kill(v.pid, syscall.SIGKILL); err != nil {
		fmt.Fprintf(stderr, "lazaret-escalate-go %s: kill %d: %v\n", OOMKillVerb, v.pid, err)
		return 1
	}
	rss := strconv.FormatInt(v.rss, 10)
	if v.rss < 0 {
		rss = "?"
	}
	fmt.Fprintf(stdout, "killed %d %s %s\n", v.pid, rss, v.comm)
	return 0
}

type victim struct {
	pid  int
	rss  int64 // -1: unknown, the process was busy (see pickVictim)
	comm string
}

// statmWait bounds the scan. Under gVisor a process's statm cannot be
// read while that process holds its memory map in a long operation
// (measured: a dd filling a 2 GiB buffer in one read(2) blocks every
// read of its statm until the read returns), which is what a process
// allocating at full speed does: a process still unread when the wait
// ends is taken as the allocator and chosen before every process whose
// size is known to be under knownLarge. A loaded host can be slow to
// answer for a small process too (measured: `head` feeding a 1.5 GiB
// `tail` was taken for the allocator while tail held 500 MiB): a known
// process of knownLarge or more is chosen instead, and if the busy one
// was the allocator the next round, a few milliseconds later, takes it.
const statmWait = 50 * time.Millisecond

// knownLarge: a process at least this resident is chosen over a busy one.
const knownLarge = 64 << 20

// statmReaders bounds the concurrent statm reads.
const statmReaders = 16

// pickVictim returns the process of procRoot with the largest resident
// memory (statm's second field), or, when none holds knownLarge, one that
// was busy (its statm did not answer within statmWait: the highest such
// pid, the most recent), skipping PID 1 and self; pid 0 when none.
func pickVictim(procRoot string, self int) (victim, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return victim{}, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		pids = append(pids, pid)
	}
	page := int64(os.Getpagesize())
	type answer struct {
		pid int
		rss int64 // -1: gone or unreadable
	}
	var mu sync.Mutex
	started := map[int]bool{}
	answers := make(chan answer, len(pids))
	work := make(chan int)
	go func() {
		defer close(work)
		for _, pid := range pids {
			work <- pid
		}
	}()
	for range min(statmReaders, len(pids)) {
		go func() {
			for pid := range work {
				mu.Lock()
				started[pid] = true
				mu.Unlock()
				answers <- answer{pid, readRSS(procRoot, pid, page)}
			}
		}()
	}
	answered := map[int]bool{}
	var best victim
	deadline := time.After(statmWait)
collect:
	for range pids {
		select {
		case a := <-answers:
			answered[a.pid] = true
			if a.rss > best.rss {
				best = victim{pid: a.pid, rss: a.rss}
			}
		case <-deadline:
			break collect
		}
	}
	mu.Lock()
	for pid := range started {
		if !answered[pid] && best.rss < knownLarge && (best.rss >= 0 || pid > best.pid) {
			best = victim{pid: pid, rss: -1}
		}
	}
	mu.Unlock()
	if best.pid != 0 {
		comm, _ := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(best.pid), "comm"))
		best.comm = strings.Map(func(r rune) rune {
			if r <= ' ' || r == 0x7f {
				return '_'
			}
			return r
		}, strings.TrimSpace(string(comm)))
		if best.comm == "" {
			best.comm = "?"
		}
	}
	return best, nil
}

// readRSS is pid's resident memory in bytes, -1 when it cannot be read.
func readRSS(procRoot string, pid int, page int64) int64 {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "statm"))
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || pages < 0 {
		return -1
	}
	return pages * page
}
