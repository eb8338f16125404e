package kubecli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/adapter/kube"
	"github.com/lazaret-dev/lazaret/internal/cli/ptytest"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/prompt"
)

// TestProposalsOnTheTerminal: a cluster session's agent proposes an
// auto_approve entry through the relay; it is shown on the session's
// terminal as a proposal and [A] approves it, so the agent's --wait exits
// 0 and the command then runs on the host without a second prompt (this
// configuration has no auto_approve: the rule is what the user approved).
// A network
// proposal is refused at once, saying why; --denials says it cannot read
// netd here.
func TestProposalsOnTheTerminal(t *testing.T) {
	bin := escBinaries(t)
	e := newEnv(t, "[cluster]\nnamespace = \"agents\"\n[profiles.dev]\nimage = \"agent:1\"\n")
	e.record(enforced)
	e.readyAfter(1, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse})
	if err := os.WriteFile(filepath.Join(e.ws, "host-marker"), []byte("from-the-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cluster.Exec.Run = localPod(t, bin, t.TempDir())
	tm := ptytest.Open(t)
	g := newGlobals(IO{In: tm.TTY, Out: tm.TTY, ErrOut: tm.TTY})
	g.connect = func(config.Cluster) (*kube.Client, error) { return e.cluster.Client, nil }
	g.now = func() time.Time { return fixedNow }
	g.poll = time.Millisecond
	script := `"$FE" --propose net example.org; echo "net=$?"; "$FE" --denials; echo "denials=$?"; ` +
		`id=$("$FE" --propose exec --why "read the marker" -- cat host-marker); "$FE" --wait "$id"; echo "wait=$?"; "$FE" -- cat host-marker; echo "rc=$?"`
	done := make(chan int, 1)
	go func() {
		done <- run(g, []string{"lazaret-kube", "--config", e.cfgFile, "--workspace", e.ws, "exec", "-t", "dev", "--", "sh", "-c", script})
	}()
	tm.WaitFor(t, "abort lazaret")
	time.Sleep(prompt.MinReadable + 200*time.Millisecond) // the readability gate
	for _, want := range []string{"proposes a policy rule", "auto_approve += cat host-marker", "read the marker"} {
		if !tm.Shows(want) {
			t.Fatalf("prompt lacks %q:\n%s", want, tm.Output())
		}
	}
	_, _ = tm.Ptmx.Write([]byte("a"))
	tm.WaitFor(t, "rc=0")
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no end")
	}
	out := tm.Output()
	for _, want := range []string{"net=126", "allow_domains", "denials=125", "wait=0", "from-the-host"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "abort lazaret") > 2 {
		t.Errorf("the approved rule was asked about again:\n%s", out)
	}
}
