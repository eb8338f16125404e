package config

import (
	"strings"
	"testing"
)

func TestAddRule(t *testing.T) {
	cases := []struct {
		name, in, table, key, value, want string
	}{
		{"one line, comment kept", "# mine\n[profiles.dev]\nimage = \"x:1\"\nallow_domains = [\"a.com\"] # why a\n",
			"profiles.dev", KeyAllowDomains, "b.com",
			"# mine\n[profiles.dev]\nimage = \"x:1\"\nallow_domains = [\"a.com\", \"b.com\"] # why a\n"},
		{"empty array", "[profiles.dev]\nimage = \"x:1\"\nallow_domains = []\n", "profiles.dev", KeyAllowDomains, "b.com",
			"[profiles.dev]\nimage = \"x:1\"\nallow_domains = [\"b.com\"]\n"},
		{"multi-line, trailing comma", "[profiles.dev]\nimage = \"x:1\"\nallow_domains = [\n  \"a.com\", # a\n  \"c.com\",  # c, with ] in it\n]\n",
			"profiles.dev", KeyAllowDomains, "b.com",
			"[profiles.dev]\nimage = \"x:1\"\nallow_domains = [\n  \"a.com\", # a\n  \"c.com\",\n  \"b.com\",  # c, with ] in it\n]\n"},
		{"multi-line, no trailing comma", "[profiles.dev]\nimage = \"x:1\"\nallow_egress = [\n    \"140.82.112.0/20\"\n]\n",
			"profiles.dev", KeyAllowEgress, "192.0.3.0/24",
			"[profiles.dev]\nimage = \"x:1\"\nallow_egress = [\n    \"140.82.112.0/20\",\n    \"192.0.3.0/24\"\n]\n"},
		{"key absent", "[profiles.dev]\nimage = \"x:1\" # pinned\n\n# next\n[profiles.other]\nimage = \"y:1\"\n",
			"profiles.dev", KeyAllowDomains, "b.com",
			"[profiles.dev]\nimage = \"x:1\" # pinned\nallow_domains = [\"b.com\"]\n\n# next\n[profiles.other]\nimage = \"y:1\"\n"},
		{"quoted table name", "[profiles.\"dev\"]\nimage = \"x:1\"\n", "profiles.dev", KeyAllowDomains, "b.com",
			"[profiles.\"dev\"]\nimage = \"x:1\"\nallow_domains = [\"b.com\"]\n"},
		{"escalation", "[escalation]\nauto_approve = [\"/usr/bin/ls\"]\n", "escalation", KeyAutoApprove, "/usr/bin/du -sh {args}",
			"[escalation]\nauto_approve = [\"/usr/bin/ls\", \"/usr/bin/du -sh {args}\"]\n"},
		{"built-in default", "[network]\nallow_domains = [\"pypi.org\"]\n", "profiles.default", KeyAllowDomains, "b.com",
			"[network]\nallow_domains = [\"pypi.org\"]\n\n[profiles.default]\nallow_domains = [\"b.com\"]\n"},
		{"table absent", "data_root = \"/tmp/lz\"", "escalation", KeyAutoApprove, "/usr/bin/ls",
			"data_root = \"/tmp/lz\"\n\n[escalation]\nauto_approve = [\"/usr/bin/ls\"]\n"},
	}
	for _, c := range cases {
		got, err := AddRule("c.toml", []byte(c.in), c.table, c.key, c.value)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// An edit that would change anything else, or could not be placed, is
// refused with the value to add by hand; the control beside each shows
// the same value is added when the file allows it.
func TestAddRuleRefused(t *testing.T) {
	cases := []struct{ name, in, table, key, value string }{
		{"dotted key elsewhere", "[profiles]\ndev.image = \"x:1\"\ndev.allow_domains = [\"a.com\"]\n", "profiles.dev", KeyAllowDomains, "b.com"},
		{"not an array", "[profiles.dev]\nimage = \"x:1\"\nallow_domains = 3\n", "profiles.dev", KeyAllowDomains, "b.com"},
		{"bad value", "[profiles.dev]\nimage = \"x:1\"\n", "profiles.dev", KeyAllowDomains, "b..com"},
		{"newline", "[profiles.dev]\nimage = \"x:1\"\n", "profiles.dev", KeyAllowDomains, "b.com\n[x]"},
		{"unknown profile", "[profiles.dev]\nimage = \"x:1\"\n", "profiles.nope", KeyAllowDomains, "b.com"},
	}
	for _, c := range cases {
		if got, err := AddRule("c.toml", []byte(c.in), c.table, c.key, c.value); err == nil {
			t.Errorf("%s: edited:\n%s", c.name, got)
		} else if !strings.Contains(err.Error(), "c.toml") {
			t.Errorf("%s: error does not name the file: %v", c.name, err)
		}
	}
	if _, err := AddRule("c.toml", []byte("[profiles.dev]\nimage = \"x:1\"\n"), "profiles.dev", KeyAllowDomains, "b.com"); err != nil {
		t.Errorf("control: %v", err)
	}
}

func FuzzAddRule(f *testing.F) {
	f.Add("[profiles.dev]\nimage = \"x:1\"\nallow_domains = [\n \"a.com\", # ]\n]\n", "b.com")
	f.Add("[escalation]\nauto_approve = ['''/usr/bin/ls''']\n", "c.com")
	f.Fuzz(func(t *testing.T, in, value string) {
		out, err := AddRule("c.toml", []byte(in), "profiles.dev", KeyAllowDomains, value)
		if err != nil {
			return
		}
		// Whatever it edits parses, with exactly one more entry.
		before, _ := Parse("c.toml", []byte(in))
		after, err := Parse("c.toml", out)
		if err != nil || len(after.Profiles["dev"].AllowDomains) != len(before.Profiles["dev"].AllowDomains)+1 {
			t.Fatalf("edit of %q with %q: %v\n%s", in, value, err, out)
		}
	})
}
