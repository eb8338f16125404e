package kubecli

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
)

// printable: what reaches the terminal from the cluster holds no control
// character (escapes, bidi and invisible characters are made visible)
// besides the line ends lazaret writes itself.
func printable(t *testing.T, what, s string) {
	t.Helper()
	for _, r := range strings.TrimRight(s, "\n") {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == 0x200b || r == 0xfeff {
			t.Fatalf("%s shows %U: %q", what, r, s)
		}
	}
}

// FuzzClusterText: names, labels, annotations and condition messages
// come from the cluster; ps, status's state and the not-ready error show
// them on one line each, escaped.
func FuzzClusterText(f *testing.F) {
	f.Add("lazaret-0123456789ab", "dev", "/home/u/p", "ReconcilerError", "image pull failed")
	f.Add("x\x1b[2Jy", "a\tb", "/w\n$ fake prompt", "r\u202e", "m\x07\r\n")
	f.Fuzz(func(t *testing.T, name, profile, ws, reason, msg string) {
		cl := kubespec.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{kubespec.LabelProfile: profile}, Annotations: map[string]string{kubespec.AnnotationWorkspace: ws}}}
		cl.Status.Sandbox.Name = name
		cond := metav1.Condition{Type: "Ready", Status: "False", Reason: reason, Message: msg}
		cl.Status.Conditions = []metav1.Condition{cond}
		g := newGlobals(IO{})
		g.now = func() time.Time { return fixedNow }
		var out bytes.Buffer
		if err := g.printClaims(&out, []kubespec.SandboxClaim{cl}); err != nil {
			t.Fatal(err)
		}
		printable(t, "ps", out.String())
		if n := strings.Count(out.String(), "\n"); n != 2 {
			t.Fatalf("ps wrote %d lines for one claim: %q", n, out.String())
		}
		var errOut bytes.Buffer
		exitCode(&notReadyError{claim: name, timeout: time.Second, last: &cond}, &errOut)
		printable(t, "not-ready error", errOut.String())
		if n := strings.Count(errOut.String(), "\n"); n != 1 {
			t.Fatalf("error is %d lines: %q", n, errOut.String())
		}
	})
}

// FuzzProbeRecord: a probe record is the namespace's ConfigMap, which
// anyone with edit rights there can write: only the three results pass.
func FuzzProbeRecord(f *testing.F) {
	f.Add("enforced", "2026-12-03T12:00:00Z", "d")
	f.Add("NOT enforced", "bad", "\x1b")
	f.Fuzz(func(t *testing.T, result, checked, detail string) {
		r, err := parseRecord(map[string]string{"result": result, "checked": checked, "detail": detail})
		if err != nil {
			return
		}
		if r.Result != enforced && r.Result != notEnforced && r.Result != unknown {
			t.Fatalf("accepted result %q", r.Result)
		}
	})
}
