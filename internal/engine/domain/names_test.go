package domain_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

// profileRule is the documented profile rule (docs/CONFIG.md, DESIGN §3).
var profileRule = regexp.MustCompile(`^[a-z0-9_-]{2,32}$`)

// trickyProfiles are names the rule admits that look like another kind's
// name, a part of one, or a prefix of another profile's.
var trickyProfiles = []string{
	"net", "netd", "netns", "net-", "ne", "netd-", "spare", "gate", "coord", "tls", "ca", "ca-inject",
	"inject", "lazaret", "lazaret-net", "agent", "overlay", "workspace", "state", "domain", "domains", "domains_",
	"_domains", "-domains", "net_", "-net", "--", "__", "a-", "-a", "a_", "_a", "a-b", "a_b", "a-b-c",
	"claude", "claude-", "claude-net", "net-claude", "0123456789ab", "0123456789ab-", "abcdef012345",
	"net-0123456789ab", "lazaret_coord_", "sock", "crt", "heads", "old", "default", "usr", "usr_changes",
	strings.Repeat("z", 32), strings.Repeat("-", 32), strings.Repeat("_", 2), "9", "99",
}

// scope of each derived name: one per data_root, one per profile, else
// one per domain (any method not listed here, so that a new derived name
// is covered without touching this test).
var (
	globalKinds  = map[string]bool{"DomainsDir": true}
	profileKinds = map[string]bool{"ProfileDir": true, "AgentBranch": true, "AgentRef": true, "SideRefPrefix": true, "OldRefPrefix": true}
)

type owner struct{ kind, profile, workspace string }

// derive returns every name domain a derives, by kind: each method of
// *Anchor that takes nothing and returns a string (found by reflection),
// the overlay paths, the label, and the git refs of the profile.
func derive(t *testing.T, a *domain.Anchor) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(a)
	for i := 0; i < v.NumMethod(); i++ {
		m := v.Type().Method(i)
		if m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0).Kind() != reflect.String {
			continue
		}
		out[m.Name] = v.Method(i).Call(nil)[0].String()
	}
	if len(out) < 17 {
		t.Fatalf("found only %d derived names: %v", len(out), out)
	}
	for _, dir := range []string{"/usr", "/var/lib", "/var"} {
		c, w, m := a.OverlayPaths(dir)
		out["OverlayDir"+dir], out["changes"+dir], out["work"+dir], out["merged"+dir] = a.OverlayDir(dir), c, w, m
	}
	out["label"] = domain.LabelKey + "=" + a.Hash
	rm := gitrepo.RefMap{Profile: a.Profile}
	out["AgentRef"], out["SideRefPrefix"], out["OldRefPrefix"] = rm.AgentRef(), rm.SideRefPrefix(), rm.OldRefPrefix()
	if rm.AgentBranch() != a.AgentBranch() {
		t.Fatalf("gitrepo's agent branch %s, domain's %s", rm.AgentBranch(), a.AgentBranch())
	}
	return out
}

func ownerOf(kind string, a *domain.Anchor) owner {
	switch {
	case globalKinds[kind]:
		return owner{kind: kind}
	case profileKinds[kind]:
		return owner{kind: kind, profile: a.Profile}
	}
	return owner{kind: kind, profile: a.Profile, workspace: a.Workspace}
}

// TestDerivedNamesInjective derives every resource of two domains (two
// workspaces) of each profile name in a table of tricky names and of
// random names the rule admits, and asserts that no two resources share
// a name, and that no path of one profile lies in or above a path of
// another profile (where a profile's files would be another's).
func TestDerivedNamesInjective(t *testing.T) {
	profiles := append([]string{}, trickyProfiles...)
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_-"
	for range 400 {
		b := make([]byte, 2+r.IntN(31))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		profiles = append(profiles, string(b))
	}
	for _, tmpl := range []string{"net-%s", "%s-net", "%s_", "%s-"} { // near a hash
		profiles = append(profiles, fmt.Sprintf(tmpl, domain.Hash("claude", "/w/one")))
	}
	seen := map[string]owner{}
	paths := map[string]owner{}
	for _, p := range profiles {
		if !profileRule.MatchString(p) || domain.ReservedProfile(p) {
			continue
		}
		for _, ws := range []string{"/w/one", "/w/two"} {
			a := &domain.Anchor{Profile: p, Workspace: ws, Hash: domain.Hash(p, ws),
				DataRoot: "/data", RuntimeDir: "/run/user/1/lazaret", SocketDir: "/run/user/1/lazaret"}
			for kind, name := range derive(t, a) {
				o := ownerOf(kind, a)
				if prev, ok := seen[name]; ok && prev != o {
					t.Errorf("%q is both %+v and %+v", name, prev, o)
				}
				seen[name] = o
				if filepath.IsAbs(name) && o.profile != "" {
					paths[name] = o
				}
			}
		}
	}
	// A path of one profile must not lie in another profile's path (the
	// global DomainsDir holds every Domain Root by design).
	for name, o := range paths {
		for dir := filepath.Dir(name); dir != "/"; dir = filepath.Dir(dir) {
			if up, ok := paths[dir]; ok && up.profile != o.profile {
				t.Errorf("%s (%+v) lies in %s (%+v)", name, o, dir, up)
			}
		}
	}
}

// TestSidecarNameNoProfileCanTake: the sidecar's name is not of the
// form of any agent container's, lazaret-<profile>-<hash>.
func TestSidecarNameNoProfileCanTake(t *testing.T) {
	agent := regexp.MustCompile(`^lazaret-[a-z0-9_-]{2,32}-[0-9a-f]{12}$`)
	for _, p := range trickyProfiles {
		a := &domain.Anchor{Profile: p, Hash: domain.Hash(p, "/w")}
		if agent.MatchString(a.Sidecar()) {
			t.Fatalf("profile %s: sidecar %s has an agent container's form", p, a.Sidecar())
		}
		if !agent.MatchString(a.Container()) && profileRule.MatchString(p) {
			t.Fatalf("profile %s: container %s", p, a.Container())
		}
	}
}

// TestReservedProfile: the one name the rule admits that is not a
// profile is the data_root's directory of Domain Roots.
func TestReservedProfile(t *testing.T) {
	a := &domain.Anchor{Profile: domain.DomainsDirName, DataRoot: "/data"}
	if a.ProfileDir() != a.DomainsDir() {
		t.Fatal("the reservation guards nothing")
	}
	if !domain.ReservedProfile("domains") || domain.ReservedProfile("net") {
		t.Fatal("ReservedProfile")
	}
}
