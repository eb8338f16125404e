// Command micro measures the per-item costs a build is made of, to run
// the same way on the host and in a sandbox (docs/PERFORMANCE.md, #20):
//
//	micro cpu N          N rounds of an integer loop without system calls
//	micro mem MIB        map MIB of anonymous memory and touch every page
//	micro spawn N PROG…  start PROG (with its arguments) N times, one after another
//	micro stat DIR       lstat every entry of the tree under DIR
//	micro read DIR       open, read and close every regular file under DIR
//	micro sys N          N getppid system calls (the platform's cost per call)
//	micro statone FILE N lstat one FILE N times (a cached metadata look-up)
//
// Each prints "<what> <count> <total ns> <ns per item>". It is static
// (CGO_ENABLED=0), so the same binary runs in the sandbox.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: micro cpu|mem|spawn|stat|read ARG…")
		os.Exit(2)
	}
	start := time.Now()
	n, err := measure(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "micro:", err)
		os.Exit(1)
	}
	d := time.Since(start)
	fmt.Printf("%s %d %d %.0f\n", os.Args[1], n, d.Nanoseconds(), float64(d.Nanoseconds())/float64(max(n, 1)))
}

func measure(what string, args []string) (int, error) {
	switch what {
	case "cpu":
		n, err := strconv.Atoi(args[0])
		x := uint64(1)
		for i := 0; i < n; i++ {
			for j := 0; j < 1_000_000; j++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		runtime.KeepAlive(x) // the loop is not optimised away
		return n, err
	case "mem":
		mib, err := strconv.Atoi(args[0])
		if err != nil {
			return 0, err
		}
		b, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return 0, err
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return len(b) / 4096, syscall.Munmap(b)
	case "spawn":
		n, err := strconv.Atoi(args[0])
		if err != nil || len(args) < 2 {
			return 0, fmt.Errorf("spawn N PROG…: %v", err)
		}
		for i := 0; i < n; i++ {
			cmd := exec.Command(args[1], args[2:]...)
			cmd.Stdout = io.Discard
			if err := cmd.Run(); err != nil {
				return i, err
			}
		}
		return n, nil
	case "sys":
		n, err := strconv.Atoi(args[0])
		for i := 0; i < n; i++ {
			syscall.Getppid()
		}
		return n, err
	case "statone":
		n, err := strconv.Atoi(args[1])
		for i := 0; i < n && err == nil; i++ {
			_, err = os.Lstat(args[0])
		}
		return n, err
	case "stat", "read":
		return walk(args[0], what == "read")
	}
	return 0, fmt.Errorf("unknown measurement %q", what)
}

// walk lstats (WalkDir's own reads) or reads every file under dir.
func walk(dir string, read bool) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !read {
			_, err := os.Lstat(p)
			n++
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, f)
		n++
		return errors.Join(err, f.Close())
	})
	return n, err
}
