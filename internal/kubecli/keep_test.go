package kubecli

import (
	"os"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
)

// TestKeptStartRefusedBeforeAnyKeeper: a detached start that cannot run
// is one line naming what is wrong, exit non-zero, and no keeper is
// spawned (its directory stays empty); attach without a kept session
// says how to list them.
func TestKeptStartRefusedBeforeAnyKeeper(t *testing.T) {
	e := newEnv(t, plainCfg)
	rt, err := domain.RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	keepers := domain.KeeperDir(rt)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"exec", "--detach", "--", "true"}, 2, "exec --detach: needs -t"},
		{[]string{"shell", "--detach", "nosuch"}, 2, "unknown profile \"nosuch\""},
		{[]string{"shell", "--detach", "--timeout", "0"}, 2, "--timeout"},
		{[]string{"attach"}, 1, "no kept session of profile default"},
	} {
		code := e.run(c.args...)
		msg := e.errOut.String()
		if code != c.code || !strings.Contains(msg, c.want) || strings.Count(strings.TrimSpace(msg), "\n") > 1 {
			t.Errorf("%q: exit %d, %q", c.args, code, msg)
		}
		if ents, _ := os.ReadDir(keepers); len(ents) != 0 {
			t.Errorf("%q left a keeper's files: %v", c.args, ents)
		}
	}
	e.run("attach")
	wantLines(t, "attach", e.errOut.String(), "hint: `lazaret --backend kubernetes ps` lists the kept sessions")
}
