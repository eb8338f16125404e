package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gvisor.dev/gvisor/pkg/seccomp/precompiledseccomp"
)

// moduleDir is the directory of the gVisor module this program is built
// against (the tests read its stand-ins).
func moduleDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "gvisor.dev/gvisor").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m gvisor.dev/gvisor: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// stubFile reads the stand-in of the pinned module (the one seccompgen
// is built against).
func stubFile(t *testing.T, dir string) []byte {
	t.Helper()
	gvisor, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(gvisor, dir, "filter_precompiled.go"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFillRegistersPrograms(t *testing.T) {
	stub := stubFile(t, "runsc/fsgofer/filter")
	prog := precompiledseccomp.Program{Name: `GOARCH="amd64" DirectFS=true`, Bytecode32: []uint32{0x6, 0x7fff0000}}
	src, err := fill(stub, []precompiledseccomp.Program{prog})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"const PrecompilationDisabledAtBuildTime = false", `programs["GOARCH=\"amd64\" DirectFS=true"] = precompiledseccomp.Program{`, "0x7fff0000"} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("generated file lacks %q", want)
		}
	}
	if bytes.Contains(src, []byte("= true")) {
		t.Error("generated file still says precompilation is disabled")
	}
}

// TestFillRefusesUnknownStub is the control: a stand-in without the lines
// seccompgen replaces is refused, not silently left without programs.
func TestFillRefusesUnknownStub(t *testing.T) {
	prog := precompiledseccomp.Program{Name: "x", Bytecode32: []uint32{6, 0}}
	for _, stub := range []string{"package filter\n", disabledLine + "\n" + makeLine + makeLine} {
		if _, err := fill([]byte(stub), []precompiledseccomp.Program{prog}); err == nil {
			t.Errorf("fill accepted %q", stub)
		}
	}
	if _, err := fill(stubFile(t, "runsc/boot/filter"), nil); err == nil {
		t.Error("fill accepted no programs")
	}
}

func TestWithoutDeviceProxies(t *testing.T) {
	keep := `GOARCH="amd64" Platform="systrap" HostNetwork=true NVProxy=false NVProxyCaps= TPUProxy=false RDMAProxy=false`
	if !withoutDeviceProxies(keep) {
		t.Errorf("dropped %s", keep)
	}
	for _, w := range []string{"NVProxy=true", "TPUProxy=true", "RDMAProxy=true"} {
		if withoutDeviceProxies(strings.Replace(keep, strings.Replace(w, "true", "false", 1), w, 1)) {
			t.Errorf("kept a program with %s", w)
		}
	}
}

// TestGenerateOnCopy runs the generator on a copy of the two stand-ins:
// what scripts/setup does before building runsc.
func TestGenerateOnCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every filter variant (about half a minute)")
	}
	dir := t.TempDir()
	for _, tg := range targets {
		p := filepath.Join(dir, tg.dir, "filter_precompiled.go")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, stubFile(t, tg.dir), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := generate(dir); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		b, err := os.ReadFile(filepath.Join(dir, tg.dir, "filter_precompiled.go"))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("precompiledseccomp.Program{")); n == 0 {
			t.Errorf("%s: no program registered", tg.dir)
		}
	}
	boot, _ := os.ReadFile(filepath.Join(dir, "runsc/boot/filter/filter_precompiled.go"))
	if want := `Platform=\"systrap\" HostNetwork=true HostNetworkRawSockets=false HostFilesystem=true`; !bytes.Contains(boot, []byte(want)) {
		t.Errorf("the Sentry's programs lack lazaret's configuration (%s)", want)
	}
}
