package kubecli

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo/gittest"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
)

// TestWorkspaceResolution: lazaret-kube resolves every situation of the
// shared table (gittest.WorkspaceCases, run by the local CLI's tests too)
// to the same workspace as `lazaret` (a .git above owned by another user
// and a dotfiles repository in $HOME are not taken, which the copy this
// replaced did), and its audit entries land in the state store of that
// Domain Anchor, the one `lazaret audit` reads.
func TestWorkspaceResolution(t *testing.T) {
	cases := gittest.WorkspaceCases(t, &gitrepo.OwnedByUser)
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	data := filepath.Join(t.TempDir(), "data")
	cfg, err := config.Parse("", []byte("data_root = \""+data+"\"\n[profiles.direct]\nimage = \"localhost/x\"\ngit_mode = \"direct\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]int{} // entries per state store: cases that share a domain share its trail
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			g := &globals{log: discardLog()}
			profile := "default"
			if c.Explicit {
				g.workspace = c.Dir
			} else {
				t.Chdir(c.Dir)
			}
			if c.Direct {
				profile = "direct"
			}
			tg, err := g.resolve(cfg, profile)
			if c.Want == "" {
				if err == nil {
					t.Fatalf("resolved to %s, want a refusal", tg.workspace)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tg.workspace != c.Want || tg.hash != domain.Hash(profile, c.Want) {
				t.Fatalf("workspace %s (%s), want %s", tg.workspace, tg.hash, c.Want)
			}
			ctx := context.Background()
			if _, err := g.auditTo(cfg, tg)(ctx, audit.Entry{Time: time.Now(), Kind: audit.KindSandboxStart, Profile: profile}); err != nil {
				t.Fatal(err)
			}
			// Where `lazaret audit` in c.Dir looks: its resolution gave
			// c.Want (internal/cli's TestWorkspaceResolution).
			db := filepath.Join(data, "domains", domain.Hash(profile, c.Want), "state.db")
			if _, err := os.Stat(db); err != nil {
				t.Fatalf("the audit entry is not where lazaret audit reads: %v", err)
			}
			st, err := store.Open(ctx, db, store.Options{Role: "test", Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			written[db]++
			if es, err := st.Audit(ctx, audit.Filter{}); err != nil || len(es) != written[db] {
				t.Errorf("audit trail of %s: %v %v", c.Want, es, err)
			}
		})
	}
}
