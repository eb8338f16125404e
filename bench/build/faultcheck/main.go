// Command faultcheck looks for the kinds of state corruption that could
// make a build in the sandbox fail where the same build on the host does
// not (docs/PERFORMANCE.md, "the in-sandbox build faults"). Each check runs
// the same way on the host and in a sandbox and exits 1 on the first
// corruption it sees:
//
//	faultcheck regs N        N rounds in each of 4 goroutines (locked to
//	                         their threads): zmm0-31 and k1-k7 hold a
//	                         pattern across a system call (sched_yield, the
//	                         form the systrap platform traps) and across a
//	                         spin while SIGPROF interrupts it; AVX-512 only
//	faultcheck gc SECONDS    6 goroutines build and check pointer-rich
//	                         lists and maps while the collector runs often
//	                         (Go 1.26's collector scans with AVX-512 where
//	                         the CPU has it)
//	faultcheck mmap DIR SECONDS [inplace]
//	                         4 writers write files into DIR (renamed into
//	                         place, or rewritten in place as the go
//	                         command's cache does) and a new process reads
//	                         each back through mmap at once
//
// It is static (CGO_ENABLED=0), so one binary runs in both places.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "faultcheck:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: faultcheck regs N | gc SECONDS | mmap DIR SECONDS [inplace] | mmapread FILE SEED SIZE")
	}
	num := func(i int) (int, error) {
		if len(args) <= i {
			return 0, fmt.Errorf("%s: missing argument %d", args[0], i)
		}
		return strconv.Atoi(args[i])
	}
	switch args[0] {
	case "regs":
		n, err := num(1)
		if err != nil {
			return err
		}
		return checkRegs(n)
	case "gc":
		secs, err := num(1)
		if err != nil {
			return err
		}
		return checkGC(time.Duration(secs) * time.Second)
	case "mmap":
		secs, err := num(2)
		if err != nil {
			return err
		}
		return checkMmap(args[1], time.Duration(secs)*time.Second, len(args) > 3 && args[3] == "inplace")
	case "mmapread":
		seed, err := strconv.ParseUint(args[2], 10, 64)
		if err != nil {
			return err
		}
		size, err := num(3)
		if err != nil {
			return err
		}
		return readBack(args[1], seed, size)
	}
	return fmt.Errorf("unknown check %q", args[0])
}

// checkRegs: see the package comment.
func checkRegs(rounds int) error {
	if !haveAVX512() {
		fmt.Println("regs: no AVX-512 on this CPU: skipped")
		return nil
	}
	// SIGPROF at the profiler's rate interrupts the spins.
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			runtime.LockOSThread()
			errs <- holdRounds(uint64(w+1)*0x9e3779b97f4a7c15, rounds)
		}()
	}
	var first error
	for range 4 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		fmt.Printf("regs: %d rounds × 2 × 4 threads, zmm0-31 and k1-7 intact\n", rounds)
	}
	return first
}

func holdRounds(seed uint64, rounds int) error {
	var in, out [256]uint64
	var kin, kout [8]uint64
	for i := range rounds {
		for mode, what := range []string{"a system call", "a spin"} {
			for j := range in {
				in[j] = seed ^ uint64(i)*1315423911 ^ uint64(j)<<40 ^ uint64(j)
			}
			for j := 1; j < 8; j++ {
				kin[j] = seed ^ uint64(i)<<8 ^ uint64(j)
			}
			clear(out[:])
			clear(kout[:])
			n := uintptr(syscall.SYS_SCHED_YIELD)
			if mode == 1 {
				n = 200000
			}
			holdVectors(&in, &out, &kin, &kout, uintptr(mode), n)
			if err := compareVectors(&in, &out, &kin, &kout); err != nil {
				return fmt.Errorf("regs: round %d, across %s: %w", i, what, err)
			}
		}
	}
	return nil
}

// compareVectors names the first register whose stored value differs.
func compareVectors(in, out *[256]uint64, kin, kout *[8]uint64) error {
	for j := range in {
		if in[j] != out[j] {
			return fmt.Errorf("zmm%d qword %d is %#x, want %#x", j/8, j%8, out[j], in[j])
		}
	}
	for j := 1; j < 8; j++ {
		if kin[j] != kout[j] {
			return fmt.Errorf("k%d is %#x, want %#x", j, kout[j], kin[j])
		}
	}
	return nil
}

type node struct {
	id, sum uint64
	next    *node
	kids    [3]*node
	name    string
	buf     []byte
}

func newNode(id uint64) *node {
	n := &node{id: id, sum: id*0x9e3779b97f4a7c15 ^ 0xabcdef, name: strconv.FormatUint(id, 16)}
	if id%3 == 0 {
		n.buf = make([]byte, 8+id%200)
		for i := range n.buf {
			n.buf[i] = byte(id + uint64(i))
		}
	}
	return n
}

func (n *node) intact() bool {
	if n.sum != n.id*0x9e3779b97f4a7c15^0xabcdef || n.name != strconv.FormatUint(n.id, 16) {
		return false
	}
	for i, b := range n.buf {
		if b != byte(n.id+uint64(i)) {
			return false
		}
	}
	return true
}

// checkGC: see the package comment.
func checkGC(d time.Duration) error {
	deadline := time.Now().Add(d)
	errs := make(chan error, 6)
	for w := range 6 {
		go func() { errs <- gcWorker(uint64(w)<<40, deadline) }()
	}
	var first error
	for range 6 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	if first == nil {
		fmt.Printf("gc: %d collections, every object intact\n", st.NumGC)
	}
	return first
}

func gcWorker(id uint64, deadline time.Time) error {
	const batch = 20000
	m := map[uint64]*node{}
	var head *node
	for round := 0; time.Now().Before(deadline); round++ {
		for range batch {
			id++
			n := newNode(id)
			n.next = head
			if head != nil {
				n.kids[id%3] = head.kids[(id+1)%3]
			}
			head = n
			if id%7 == 0 {
				m[id] = n
			}
		}
		count := 0
		for n := head; n != nil; n = n.next {
			if !n.intact() {
				return fmt.Errorf("gc: round %d: node %d corrupted", round, n.id)
			}
			for _, k := range n.kids {
				if k != nil && !k.intact() {
					return fmt.Errorf("gc: round %d: node %d corrupted", round, k.id)
				}
			}
			count++
		}
		for k, v := range m {
			if v.id != k || !v.intact() {
				return fmt.Errorf("gc: round %d: map entry %d corrupted", round, k)
			}
		}
		if want := batch * (round%4 + 1); count != want {
			return fmt.Errorf("gc: round %d: the list has %d nodes, want %d", round, count, want)
		}
		if round%4 == 3 {
			head, m = nil, map[uint64]*node{}
		}
	}
	return nil
}

// content is the deterministic content of a file.
func content(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x1234))
	b := make([]byte, size)
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// checkMmap: see the package comment.
func checkMmap(dir string, d time.Duration, inplace bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	files := 0
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := 0; time.Now().Before(deadline); i++ {
				seed := uint64(w)<<32 | uint64(i)
				size := 4096 + int(seed*2654435761%(1<<20))&^7
				name := filepath.Join(dir, fmt.Sprintf("faultcheck-%d-%d", w, i%50))
				if err := writeFile(name, content(seed, size), inplace); err != nil {
					errs <- err
					return
				}
				out, err := exec.Command(self, "mmapread", name, strconv.FormatUint(seed, 10), strconv.Itoa(size)).CombinedOutput()
				if err != nil {
					errs <- fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
					return
				}
				mu.Lock()
				files++
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	var first error
	for range 4 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for w := range 4 {
		for i := range 50 {
			_ = os.Remove(filepath.Join(dir, fmt.Sprintf("faultcheck-%d-%d", w, i)))
		}
	}
	if first == nil {
		fmt.Printf("mmap: %d files written and read back through mmap by another process, all intact\n", files)
	}
	return first
}

func writeFile(name string, data []byte, inplace bool) error {
	if !inplace {
		tmp := name + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, name)
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readBack maps name and compares it with content(seed, size).
func readBack(name string, seed uint64, size int) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", name, err)
	}
	defer syscall.Munmap(b)
	want := content(seed, size)
	if i := firstDiff(b, want); i >= 0 {
		return fmt.Errorf("mmap: %s differs at byte %d of %d: % x, want % x", name, i, size, b[i:min(i+16, size)], want[i:min(i+16, size)])
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
