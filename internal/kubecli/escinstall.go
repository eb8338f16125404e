package kubecli

import (
	"context"
	"fmt"
	"os"

	"github.com/lazaret-dev/lazaret/internal/escprompt"
	"github.com/lazaret-dev/lazaret/internal/kube"
	"github.com/lazaret-dev/lazaret/internal/kubespec"
	"github.com/lazaret-dev/lazaret/internal/locate"
)

// installClient copies the escalation front end and Go client into the
// pod's /run/lazaret/bin (a new file renamed over the old one).
func (g *globals) installClient(ctx context.Context, c *kube.Client, pod string) error {
	for name, dst := range map[string]string{locate.Escalate: escprompt.SandboxClient, locate.EscalateGo: escprompt.SandboxGoClient} {
		src, err := locate.Find(name)
		if err != nil {
			return err
		}
		f, err := os.Open(src)
		if err != nil {
			return fmt.Errorf("escalation client: %w", err)
		}
		code, err := c.ExecIn(ctx, kube.ExecRequest{Pod: pod, Container: kubespec.ContainerName, Stdin: f,
			Command: []string{"/bin/sh", "-c", `set -e; mkdir -p "${0%/*}"; t="$0.tmp.$$"; cat >"$t"; chmod 755 "$t"; mv -f "$t" "$0"`, dst}})
		f.Close()
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		if err != nil {
			return fmt.Errorf("installing %s in pod %s: %w", name, pod, err)
		}
	}
	return nil
}
