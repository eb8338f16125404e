package kubecli

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
)

// podOnHost answers the fake cluster's execs by running them on the host
// with the pod's /workspace at dir; the user's command commits as the
// agent would.
func podOnHost(t *testing.T, dir string) func(kube.ExecRequest) (int, error) {
	return func(r kube.ExecRequest) (int, error) {
		argv := slices.Clone(r.Command)
		if argv[0] == "sh" && argv[1] == "-c" {
			argv[2] = strings.ReplaceAll(argv[2], "/workspace", dir)
		} else {
			argv = []string{"git", "-C", dir, "-c", "user.name=agent", "-c", "user.email=agent@sandbox.invalid",
				"commit", "-q", "--allow-empty", "-m", "agent work"}
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = r.Stdin, r.Stdout, r.Stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
}

// TestExecSeedsAndSyncsTheClone: the first exec in a branch-mode
// workspace seeds the pod's clone from the host's HEAD (through the
// exec's streams), and the agent's commit comes back to the host's agent
// branch when the command ends; `sync` says there is nothing new.
func TestExecSeedsAndSyncsTheClone(t *testing.T) {
	e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\n")
	e.ws = gittest.NewRepo(t)
	head := gittest.Git(t, e.ws, "rev-parse", "HEAD")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	pod := filepath.Join(t.TempDir(), "workspace")
	e.cluster.Exec.Run = podOnHost(t, pod)
	if code := e.run("exec", "dev", "--", "make"); code != 0 {
		t.Fatalf("exit %d: %s", code, e.errOut.String())
	}
	m := gitrepo.RefMap{Profile: "dev"}
	agent := gittest.Git(t, pod, "rev-parse", "HEAD")
	if agent == head || gittest.Git(t, pod, "rev-parse", "HEAD~1") != head {
		t.Fatalf("pod clone at %s, want one commit over %s", agent, head)
	}
	if got := gittest.Git(t, e.ws, "rev-parse", m.AgentRef()); got != agent {
		t.Fatalf("host %s = %s, want the agent's %s", m.AgentRef(), got, agent)
	}
	if code := e.run("sync", "dev"); code != 0 || !strings.Contains(e.out.String(), "0 ref(s) updated") {
		t.Fatalf("sync: exit %d: %s%s", code, e.out.String(), e.errOut.String())
	}
}

// TestSyncAuditsRefusedBranches: a branch name lazaret refuses in the pod
// is not synced, and the Domain Anchor's audit trail (the one `lazaret
// audit` shows) records it. Control: a valid branch of the same sync
// arrives.
func TestSyncAuditsRefusedBranches(t *testing.T) {
	e := newEnv(t, plainCfg+"[profiles.dev]\nimage = \"agent:1\"\n")
	e.ws = gittest.NewRepo(t)
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	pod := filepath.Join(t.TempDir(), "workspace")
	e.cluster.Exec.Run = podOnHost(t, pod)
	if code := e.run("exec", "dev", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, e.errOut.String())
	}
	gittest.Git(t, pod, "branch", `bad"name`)
	gittest.Git(t, pod, "branch", "good")
	if code := e.run("sync", "dev"); code != 0 {
		t.Fatalf("sync: exit %d: %s", code, e.errOut.String())
	}
	m := gitrepo.RefMap{Profile: "dev"}
	gittest.Git(t, e.ws, "rev-parse", "--verify", m.SideRefPrefix()+"good")
	cfg, err := config.Load(e.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := domain.RuntimeDir()
	a, err := domain.New("dev", e.ws, cfg.DataRoot, rd, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), a.StateDB(), store.Options{Role: "test", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	entries, err := st.Audit(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, en := range entries {
		found = found || (en.Kind == audit.KindGitRefSkipped && en.Fields["ref"] == `refs/heads/bad"name` && strings.HasPrefix(en.Fields["container"], "pod/"))
	}
	if !found {
		t.Fatalf("no git.ref_skipped entry for the refused branch in %+v", entries)
	}
}
