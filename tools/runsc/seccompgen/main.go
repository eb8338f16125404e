// Command seccompgen precompiles the seccomp filters of the pinned runsc:
// the Sentry's and the gofer's. gVisor's Bazel build generates them into
// filter_precompiled.go; the Go module carries an empty stand-in, so a
// `go build` of runsc compiles and optimises each filter at every sandbox
// start instead (tens of milliseconds of CPU on the start's critical path;
// runsc logs "No precompiled program found ... This slows down sandbox
// startup"). seccompgen replaces each stand-in, in a writable copy of the
// gVisor module of the version this module pins, with one that holds the
// programs; runsc is then built from that copy. The rules are runsc's own
// (its config packages' PrecompiledPrograms); only when they are compiled
// changes.
//
// Usage: seccompgen DIR (the copy).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gvisor.dev/gvisor/pkg/seccomp/precompiledseccomp"
	bootconfig "gvisor.dev/gvisor/runsc/boot/filter/config"
	goferconfig "gvisor.dev/gvisor/runsc/fsgofer/filter/config"
)

// A target is one package whose stand-in is replaced.
type target struct {
	dir      string // the package's directory in the gVisor module
	programs func() ([]precompiledseccomp.Program, error)
	// keep selects programs by name (their options as NAME=VALUE
	// words); nil keeps all.
	keep func(name string) bool
}

var targets = []target{
	{"runsc/boot/filter", bootconfig.PrecompiledPrograms, withoutDeviceProxies},
	{"runsc/fsgofer/filter", goferconfig.PrecompiledPrograms, nil},
}

// withoutDeviceProxies drops the Sentry's variants for GPU, TPU and RDMA
// devices (18 programs of 576 remain: each platform, network and directfs
// choice): lazaret passes no devices into a sandbox, and a configuration
// without a precompiled program still works, compiling its filter at start.
func withoutDeviceProxies(name string) bool {
	for _, w := range strings.Fields(name) {
		switch w {
		case "NVProxy=true", "TPUProxy=true", "RDMAProxy=true":
			return false
		}
	}
	return true
}

// The stand-in's lines that the generated file changes; the pinned
// version is checked to have each exactly once.
const (
	disabledLine = "const PrecompilationDisabledAtBuildTime = true"
	makeLine     = "\tprograms := make(map[string]precompiledseccomp.Program)\n"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: seccompgen DIR (a writable copy of the pinned gVisor module)")
		os.Exit(2)
	}
	if err := generate(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "seccompgen: %v\n", err)
		os.Exit(1)
	}
}

// generate replaces each target's stand-in under gvisor.
func generate(gvisor string) error {
	for _, t := range targets {
		path := filepath.Join(gvisor, t.dir, "filter_precompiled.go")
		stub, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		progs, err := t.programs()
		if err != nil {
			return fmt.Errorf("%s: %w", t.dir, err)
		}
		if t.keep != nil {
			progs = slices.DeleteFunc(progs, func(p precompiledseccomp.Program) bool { return !t.keep(p.Name) })
		}
		src, err := fill(stub, progs)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := os.WriteFile(path, src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fill returns the stand-in with the programs registered and
// precompilation marked as done at build time.
func fill(stub []byte, progs []precompiledseccomp.Program) ([]byte, error) {
	if len(progs) == 0 {
		return nil, errors.New("no programs to precompile")
	}
	for _, line := range []string{disabledLine, makeLine} {
		if n := bytes.Count(stub, []byte(line)); n != 1 {
			return nil, fmt.Errorf("expected %q once, found it %d times: not the stand-in this generator knows", strings.TrimSpace(line), n)
		}
	}
	var reg strings.Builder
	reg.WriteString(makeLine)
	for _, p := range progs {
		reg.WriteString(p.Registration("\t", "precompiledseccomp", "programs"))
	}
	src := bytes.Replace(stub, []byte(disabledLine), []byte("const PrecompilationDisabledAtBuildTime = false"), 1)
	return bytes.Replace(src, []byte(makeLine), []byte(reg.String()), 1), nil
}
