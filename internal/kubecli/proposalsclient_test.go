package kubecli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"

	"github.com/lazaret-dev/lazaret/internal/engine/approvals"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/ctlserver"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/proposal"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
)

// fakeSession serves, on a cluster session's control socket, the status
// of domain hash and the proposals of a real manager over its own hub,
// as a lazaret-kube session does; it returns the manager and its rules.
func fakeSession(t *testing.T, id, hash string, cfg *config.Config) (*proposal.Manager, *eschost.Policy) {
	t.Helper()
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.EnsurePrivateDir(domain.KubeSessionDir(rt)); err != nil {
		t.Fatal(err)
	}
	ln, err := ctlserver.Listen(domain.KubeSessionSocket(rt, id))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rules := &eschost.Policy{}
	m := proposal.New(ctx, proposal.Options{Config: cfg, Profile: cfg.Profiles["dev"], Registry: proposal.Hub(approvals.New(nil, config.AnswerFromAny)), Rules: rules})
	srv := ctlserver.NewServer(os.Getuid(), nil)
	srv.Handle(ctl.TypeStatus, func(context.Context, *ctlserver.Request) (any, error) { return &ctl.Status{Domain: hash}, nil })
	for typ, h := range proposal.Handlers(m) {
		srv.Handle(typ, h)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { cancel(); _ = srv.Close(); <-done })
	return m, rules
}

// TestProposalsOverSessions: `lazaret --backend kubernetes proposals`
// reaches the proposals of this sandbox's running sessions on their
// control sockets: lists one, shows its hash, approves it bound to that
// hash with --save (the rule joins the session's live policy and the
// configuration file, comments kept); a session of another sandbox on the
// same host is not listed and its proposal is not found (the control);
// a stale --hash is refused. Without a session: one line saying where
// proposals live.
func TestProposalsOverSessions(t *testing.T) {
	doc := "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"  # pinned\n"
	e := newEnv(t, doc)
	if code := e.run("proposals", "dev"); code != 1 || !strings.Contains(e.errOut.String(), "no cluster session of profile dev") {
		t.Fatalf("no session: exit %d %q", code, e.errOut.String())
	}
	cfg, err := config.Parse(e.cfgFile, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	m, rules := fakeSession(t, "s1", e.hash("dev"), cfg)
	other, _ := fakeSession(t, "s2", domain.Hash("dev", t.TempDir()), cfg)
	sess := &eschost.Session{ID: "s1"}
	mine := m.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"cat", "host-marker"}, Why: "read it", Session: sess})
	theirs := other.Propose(context.Background(), eschost.Proposal{Kind: "exec", Argv: []string{"cat", "theirs"}, Session: sess})
	if mine.Status != eschost.ProposalPending || theirs.Status != eschost.ProposalPending {
		t.Fatalf("%+v %+v", mine, theirs)
	}
	if code := e.run("proposals", "dev"); code != 0 || !strings.Contains(e.out.String(), mine.ID) || strings.Contains(e.out.String(), theirs.ID) {
		t.Fatalf("list: exit %d\n%s%s", code, e.out.String(), e.errOut.String())
	}
	if code := e.run("proposals", "show", "dev", theirs.ID); code == 0 || !strings.Contains(e.errOut.String(), "no proposal") {
		t.Errorf("another sandbox's proposal: exit %d %q", code, e.errOut.String())
	}
	if code := e.run("proposals", "approve", "dev", mine.ID, "--hash", "0000"); code == 0 || !strings.Contains(e.errOut.String(), "show it again") {
		t.Errorf("stale hash: exit %d %q", code, e.errOut.String())
	}
	p, _ := m.Get(mine.ID)
	if code := e.run("proposals", "approve", "dev", mine.ID, "--hash", p.Hash, "--save", "--reason", "ok"); code != 0 {
		t.Fatalf("approve: exit %d\n%s%s", code, e.out.String(), e.errOut.String())
	}
	if len(rules.Rules()) != 1 || !strings.Contains(e.out.String(), "+auto_approve = [\"cat host-marker\"]") {
		t.Errorf("rules %q, output:\n%s", rules.Rules(), e.out.String())
	}
	saved, _ := os.ReadFile(e.cfgFile)
	if !strings.Contains(string(saved), "# pinned") || !strings.Contains(string(saved), `auto_approve = ["cat host-marker"]`) {
		t.Errorf("saved:\n%s", saved)
	}
	if w, err := m.Wait(context.Background(), mine.ID); err != nil || w.Status != eschost.ProposalApproved {
		t.Errorf("the agent's wait: %+v %v", w, err)
	}
}

// shortRuntimeDir points XDG_RUNTIME_DIR at a short directory.
func shortRuntimeDir(t *testing.T) {
	short, err := os.MkdirTemp("", "lzp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	t.Setenv("XDG_RUNTIME_DIR", short)
}

// TestProposalAnsweredFromAnotherCLI: the real path without a terminal.
// A cluster session run without one proposes an auto_approve entry
// through the relay; it waits in the session's hub (it used to be
// refused: nobody could decide it); `lazaret --backend kubernetes
// proposals` in another process lists it as pending (the control: the
// agent's --wait has not returned) and approves it on the session's
// control socket, so the --wait exits 0 and the command runs on the host.
func TestProposalAnsweredFromAnotherCLI(t *testing.T) {
	bin := escBinaries(t)
	e := newEnv(t, "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	if err := os.WriteFile(filepath.Join(e.ws, "host-marker"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cluster.Exec.Run = localPod(t, bin, t.TempDir())
	shortRuntimeDir(t) // a session's socket path must fit sun_path
	var out lockedBuf
	g := newGlobals(IO{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
	g.now = func() time.Time { return fixedNow }
	g.poll = time.Millisecond
	script := `id=$("$FE" --propose exec --why "read it" -- cat host-marker); echo "id=$id"; "$FE" --wait "$id"; echo "wait=$?"; "$FE" -- cat host-marker; echo "rc=$?"`
	done := make(chan int, 1)
	go func() {
		done <- run(g, []string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws, "exec", "dev", "--", "sh", "-c", script})
	}()
	re := regexp.MustCompile(`id=([0-9a-f]{8})\n`)
	var id string
	for deadline := time.Now().Add(time.Minute); id == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			id = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no proposal id:\n%s", out.String())
		}
	}
	if code := e.run("proposals", "dev"); code != 0 || !strings.Contains(e.out.String(), id+"  pending") || strings.Contains(out.String(), "wait=") {
		t.Fatalf("before the answer: exit %d\n%s%s\nsession:\n%s", code, e.out.String(), e.errOut.String(), out.String())
	}
	if code := e.run("proposals", "approve", "dev", id, "--reason", "fine"); code != 0 || !strings.Contains(e.out.String(), "approved "+id) {
		t.Fatalf("approve: exit %d\n%s%s", code, e.out.String(), e.errOut.String())
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("session exit %d", code)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no end:\n%s", out.String())
	}
	for _, want := range []string{"wait=0", "from-the-host", "rc=0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("session output lacks %q:\n%s", want, out.String())
		}
	}
}
