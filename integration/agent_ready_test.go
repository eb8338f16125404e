//go:build integration

package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/cli/image"
	"github.com/lazaret-dev/lazaret/internal/engine/trust/trusttest"
)

// The CA test runs this test binary inside the sandbox as a TLS server on
// its loopback (the sandbox reaches nothing else here).
const arHelperEnv = "LAZARET_AGENTHELPER"

func init() {
	if os.Getenv(arHelperEnv) == "tls-serve" {
		os.Exit(arTLSServe(os.Args[1:]))
	}
}

// arTLSServe serves HTTPS on args[2] with the certificate args[0] and key
// args[1]: 404 for everything, "ready" on stdout once listening.
func arTLSServe(args []string) int {
	cert, err := tls.LoadX509KeyPair(args[0], args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := tls.Listen("tcp", args[2], &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready")
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 10 * time.Second}
	_ = srv.Serve(ln)
	return 0
}

// arSecond returns a copy of e working in a second workspace (same data
// root and configuration, so the same profiles).
func arSecond(t *testing.T, e *Env, name string) *Env {
	t.Helper()
	e2 := *e
	e2.Workspace = filepath.Join(e.Root, name)
	if err := os.MkdirAll(e2.Workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	return &e2
}

// arRunning reports whether the sandbox of profile in e's workspace runs.
func arRunning(t *testing.T, e *Env, profile string) bool {
	t.Helper()
	var st lcStatus
	return json.Unmarshal([]byte(e.MustRun("status", profile, "--json")), &st) == nil && st.Running
}

// arMakeDeb builds and installs (apt-get install ./file.deb, offline) a
// one-file package lzhello, marks it automatically installed (a record in
// /var/lib/apt/extended_states) and checks it is known.
const arMakeDeb = `set -e
d=$(mktemp -d); mkdir -p $d/p/DEBIAN $d/p/usr/bin
printf 'Package: lzhello\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: lazaret test package\n' > $d/p/DEBIAN/control
printf '#!/bin/sh\necho hello-lz\n' > $d/p/usr/bin/lzhello; chmod 755 $d/p/usr/bin/lzhello
dpkg-deb --root-owner-group --build $d/p /tmp/lzhello.deb >/dev/null
apt-get install -y -q /tmp/lzhello.deb >/dev/null 2>&1
apt-mark auto lzhello >/dev/null
dpkg -l lzhello | grep -q '^ii  lzhello'
`

// arCheckDeb reports the package's state after a restart.
const arCheckDeb = `lzhello; dpkg -l lzhello 2>&1 | grep '^ii' | cut -c1-12; apt-mark showauto lzhello`

// TestAgentAptStateAcrossWorkspaces: a package installed with apt in one
// workspace's sandbox is, after a restart and in another workspace of the
// same profile, still known to dpkg and apt (its files under /usr, dpkg's
// status under /var/lib/dpkg, apt's marks under /var/lib/apt), and
// apt-get remove works. Positive control: with only /usr persistent (the
// previous default) the files survive but dpkg forgets the package.
func TestAgentAptStateAcrossWorkspaces(t *testing.T) {
	e := NewEnv(t)
	// /usr alone, as before it brought its package database along.
	e.WriteConfig("[profiles.usronly]\nimage = \"localhost/lazaret-default:latest\"\npersistent_dirs = [\"/usr\"]\npersist_package_db = false\n")
	b := arSecond(t, e, "ws-b")

	e.MustRun("exec", "--", "bash", "-c", arMakeDeb)
	e.MustRun("stop")
	out := b.MustRun("exec", "--", "bash", "-c", arCheckDeb)
	if out != "hello-lz\nii  lzhello \nlzhello\n" {
		t.Fatalf("after restart in another workspace: %q", out)
	}
	b.MustRun("exec", "--", "apt-get", "remove", "-y", "-q", "lzhello")
	b.MustRun("stop")
	if r := e.Run("exec", "--", "bash", "-c", "command -v lzhello || dpkg -s lzhello"); r.Code == 0 {
		t.Fatalf("removed package still there: %s", r.Stdout)
	}
	openOverlayRoot(t, filepath.Join(e.DataRoot, "default", "overlay"), func() {
		if _, err := os.Stat(filepath.Join(e.DataRoot, "default", "overlay", "var_lib_dpkg", "var_lib_dpkg_changes")); err != nil {
			t.Errorf("dpkg state not in the profile's State Anchor: %v", err)
		}
	})
	e.MustRun("stop")

	// Control: /usr alone keeps the files but not the package database.
	e.MustRun("exec", "usronly", "--", "bash", "-c", arMakeDeb)
	e.MustRun("stop", "usronly")
	r := e.Run("exec", "usronly", "--", "bash", "-c", arCheckDeb)
	if !strings.HasPrefix(r.Stdout, "hello-lz\n") || strings.Contains(r.Stdout, "ii  lzhello") {
		t.Fatalf("control (/usr only): %q, %s", r.Stdout, r.Stderr)
	}
}

// TestAgentLegacyDomainOverlayKept: a workspace whose State Anchor holds
// changes of its own (made with persist = "workspace", which is also the
// layout before persistence was per profile) keeps them when the profile
// switches to persist = "profile"; another workspace uses the profile's.
func TestAgentLegacyDomainOverlayKept(t *testing.T) {
	e := NewEnv(t)
	e.WriteConfig("[profiles.legacy]\nimage = \"localhost/lazaret-default:latest\"\npersist = \"workspace\"\n")
	b := arSecond(t, e, "ws-b")
	e.MustRun("exec", "legacy", "--", "touch", "/usr/local/share/legacy-marker")
	e.MustRun("stop", "legacy")

	e.WriteConfig("[profiles.legacy]\nimage = \"localhost/lazaret-default:latest\"\n")
	e.MustRun("exec", "legacy", "--", "test", "-f", "/usr/local/share/legacy-marker")
	if out := e.MustRun("state", "legacy"); !strings.Contains(out, filepath.Join("domains")) {
		t.Errorf("state does not show the workspace's own overlay:\n%s", out)
	}
	if r := b.Run("exec", "legacy", "--", "test", "-f", "/usr/local/share/legacy-marker"); r.Code != 1 {
		t.Errorf("another workspace sees the legacy workspace's changes: exit %d %s", r.Code, r.Stderr)
	}
	openOverlayRoot(t, filepath.Join(e.DataRoot, "legacy", "overlay"), func() {
		if _, err := os.Stat(filepath.Join(e.DataRoot, "legacy", "overlay", "usr", "usr_changes")); err != nil {
			t.Errorf("the other workspace did not use the profile's overlay: %v", err)
		}
	})
}

// TestAgentImagePullOffline: a profile's registry image that is missing
// cannot be pulled on this machine (no registry reachable): `lazaret image
// pull` and a start both say so in one line naming the profile, the
// configuration file and line of its image, and the podman pull command.
func TestAgentImagePullOffline(t *testing.T) {
	e := NewEnv(t)
	// A name no registry has, so the test never downloads anything even
	// where a registry is reachable.
	const ref = "registry.invalid/lazaret-test/none:1.0"
	e.WriteConfig("[profiles.claude]\n\nimage = \"" + ref + "\"\n")
	loc := e.Config + ":4"
	for _, args := range [][]string{{"image", "pull", "claude"}, {"exec", "claude", "--", "true"}} {
		r := e.Run(args...)
		if r.Code != 3 {
			t.Errorf("%v: exit %d, want 3\n%s", args, r.Code, r.Stderr)
		}
		var line string
		for _, l := range strings.Split(r.Stderr, "\n") {
			if strings.HasPrefix(l, "lazaret: ") {
				line = l
			}
		}
		for _, want := range []string{"profile claude", "cannot be pulled", loc, "profiles.claude.image", "podman pull " + ref} {
			if !strings.Contains(line, want) {
				t.Errorf("%v: message lacks %q:\n%s", args, want, r.Stderr)
			}
		}
	}
	// A built-in recipe's image is built, not pulled.
	e.WriteConfig("[profiles.claude]\nimage = \"" + image.AgentImage + "\"\n")
	if _, err := Podman(t, "image", "exists", image.AgentImage); err != nil {
		r := e.Run("image", "pull", "claude")
		if r.Code != 3 || !strings.Contains(r.Stderr, "lazaret image build agent") {
			t.Errorf("pull of the agent image: exit %d %s", r.Code, r.Stderr)
		}
	}
}

// TestAgentImage: the agent-ready image has node >= 22, npm, ps and curl.
// Building it takes minutes, so it is built only when LAZARET_TEST_AGENT_IMAGE=1
// (and used when it exists).
func TestAgentImage(t *testing.T) {
	e := NewEnv(t)
	if os.Getenv("LAZARET_TEST_AGENT_IMAGE") == "1" {
		start := time.Now()
		r := e.Run("image", "build", "agent")
		if r.Code != 0 {
			t.Fatalf("image build agent: exit %d\n%s", r.Code, r.Stderr)
		}
		t.Logf("lazaret image build agent took %v", time.Since(start).Round(time.Second))
	} else if _, err := Podman(t, "image", "exists", image.AgentImage); err != nil {
		t.Skip("agent image not built; set LAZARET_TEST_AGENT_IMAGE=1 to build it (several minutes)")
	}
	e.WriteConfig("[profiles.agent]\nimage = \"" + image.AgentImage + "\"\n")
	out := e.MustRun("exec", "agent", "--", "bash", "-c", "node --version; npm --version; ps -o comm= -p $$; curl --version | head -1; git --version")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("agent image: %q", lines)
	if len(lines) != 5 {
		t.Fatalf("output: %q", out)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("node --version: %q", lines[0])
	}
	if v, _ := strconv.Atoi(m[1]); v < 22 {
		t.Errorf("node %s < 22", lines[0])
	}
	if !regexp.MustCompile(`^\d+\.\d+`).MatchString(lines[1]) || lines[2] != "bash" || !strings.HasPrefix(lines[3], "curl ") || !strings.HasPrefix(lines[4], "git version") {
		t.Errorf("tools: %q", lines)
	}
}

// TestAgentCABundle: a CA added to a host bundle named by ca_bundle (the
// way a TLS-intercepting proxy's CA is in the host's trust store) reaches
// the sandbox read-only, with the TLS variables pointing at it, and git
// trusts a server it signed through them. Positive control: the same git
// call without the variables (the image's own trust store) refuses the
// server's certificate. A bundle holding a private key is refused at load.
func TestAgentCABundle(t *testing.T) {
	e := NewEnv(t)
	caPEM, certPEM, keyPEM := trusttest.ServerCert(t, "127.0.0.1")
	bundle := filepath.Join(e.Root, "host-bundle.crt")
	host, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err := os.WriteFile(bundle, append(append([]byte{}, host...), caPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"srv.crt": certPEM, "srv.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(e.Workspace, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Volumes are directories: mount the test binary's.
	e.WriteConfig(fmt.Sprintf("[profiles.ca]\nimage = \"localhost/lazaret-default:latest\"\nca_bundle = %q\nvolumes = [{ host = %q, container = \"/opt/lzhelper\", mode = \"ro\" }]\n", bundle, filepath.Dir(exe)))

	out := e.MustRun("exec", "ca", "--", "sh", "-c", `for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do printenv $v; done`)
	if want := strings.Repeat("/run/lazaret/ca-certificates.crt\n", 5); out != want {
		t.Errorf("CA variables: %q", out)
	}
	inside := e.MustRun("exec", "ca", "--", "cat", "/run/lazaret/ca-certificates.crt")
	if !strings.Contains(inside, string(caPEM)) {
		t.Fatal("the test CA is not in the sandbox's bundle")
	}
	if r := e.Run("exec", "ca", "--", "sh", "-c", "echo x >> /run/lazaret/ca-certificates.crt"); r.Code == 0 {
		t.Error("the sandbox could write the CA bundle")
	}

	script := `LAZARET_AGENTHELPER=tls-serve /opt/lzhelper/` + filepath.Base(exe) + ` /workspace/srv.crt /workspace/srv.key 127.0.0.1:8443 > /tmp/srv.log 2>&1 &
for i in $(seq 100); do grep -q ready /tmp/srv.log && break; sleep 0.1; done
echo "== with"; git ls-remote https://127.0.0.1:8443/repo.git 2>&1
echo "== without"; env -u GIT_SSL_CAINFO -u SSL_CERT_FILE -u CURL_CA_BUNDLE git ls-remote https://127.0.0.1:8443/repo.git 2>&1
true`
	out = e.MustRun("exec", "ca", "--", "bash", "-c", script)
	with, without, ok := strings.Cut(out, "== without")
	if !ok {
		t.Fatalf("output: %s", out)
	}
	t.Logf("git with the bundle: %s\ngit without: %s", with, without)
	if strings.Contains(strings.ToLower(with), "certificate") || !strings.Contains(with, "not found") {
		t.Errorf("git did not trust the test CA through GIT_SSL_CAINFO: %s", with)
	}
	if !strings.Contains(strings.ToLower(without), "certificate") {
		t.Errorf("control: git without the variables accepted the server: %s", without)
	}

	// A bundle with a private key is refused at load, naming file:line:key.
	if err := os.WriteFile(bundle, append(append([]byte{}, caPEM...), keyPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Run("exec", "ca", "--", "true")
	if r.Code != 4 || !strings.Contains(r.Stderr, e.Config+":4: profiles.ca.ca_bundle: ") || !strings.Contains(r.Stderr, "private key") {
		t.Errorf("bundle with a key: exit %d %s", r.Code, r.Stderr)
	}
}
