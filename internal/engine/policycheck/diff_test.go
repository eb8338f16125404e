package policycheck

import (
	"testing"

	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

func parse(t *testing.T, toml string) *config.Config {
	t.Helper()
	c, err := config.Parse("test.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDiff(t *testing.T) {
	old := parse(t, `
[network]
allow_domains = ["pypi.org"]
[escalation]
auto_approve = ["/usr/bin/ls"]
[profiles.dev]
image = "localhost/x:1"
allow_domains = ["github.com"]
[profiles.gone]
image = "localhost/x:1"
allow_egress = ["140.82.112.0/20"]
`)
	new := parse(t, `
[network]
allow_domains = ["pypi.org", "*.githubusercontent.com"]
[escalation]
auto_approve = ["/usr/bin/ls", "make test"]
answer_from = "any"
[profiles.dev]
image = "localhost/x:1"
allow_domains = []
[profiles.new]
image = "localhost/x:1"
allow_egress = ["10.0.0.0/8"]
`)
	got := map[string]Change{}
	for _, c := range Diff(old, new) {
		got[c.Profile+"|"+c.Key+"|"+c.Rule] = c
	}
	want := []struct {
		key   string
		opens bool
		code  string
	}{
		{"dev|allow_domains|*.githubusercontent.com", true, CodeTooBroad}, // a private public suffix
		{"dev|allow_domains|github.com", false, ""},
		{"default|allow_domains|*.githubusercontent.com", true, CodeTooBroad},
		{"gone|allow_egress|140.82.112.0/20", false, ""},
		{"gone|allow_domains|pypi.org", false, ""},
		{"new|allow_egress|10.0.0.0/8", true, CodeSpecialRange},
		{"new|allow_domains|*.githubusercontent.com", true, CodeTooBroad},
		{"new|allow_domains|pypi.org", true, ""},
		{"|escalation.auto_approve|make test", true, CodeAgentFiles},
		{"|escalation.answer_from|any (was session)", true, ""},
	}
	for _, w := range want {
		c, ok := got[w.key]
		if !ok {
			t.Errorf("missing %s; got %v", w.key, keys(got))
			continue
		}
		if c.Opens != w.opens {
			t.Errorf("%s: opens=%v", w.key, c.Opens)
		}
		if w.code != "" {
			if c.Check == nil {
				t.Errorf("%s: not checked", w.key)
			} else if _, ok := find(*c.Check, w.code); !ok {
				t.Errorf("%s: no %s in %+v", w.key, w.code, c.Check.Findings)
			}
		}
		delete(got, w.key)
	}
	if len(got) != 0 {
		t.Errorf("unexpected changes: %v", keys(got))
	}
	// Control: a configuration compared with itself changes nothing.
	if d := Diff(new, new); len(d) != 0 {
		t.Errorf("self diff: %+v", d)
	}
}

func keys(m map[string]Change) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
