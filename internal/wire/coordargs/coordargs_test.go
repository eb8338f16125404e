package coordargs

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, a := range []Args{
		{Profile: "default", Workspace: "/w"},
		{Config: "/c.toml", Verbose: true, AllowRoot: true, Profile: "claude", Workspace: "/w x", Attempt: "try-2", WithChanges: true, Recover: true},
	} {
		argv := a.Argv()
		if argv[0] != Verb {
			t.Fatalf("%v", argv)
		}
		got, err := Parse(argv[1:])
		if err != nil || got != a {
			t.Errorf("%v → %+v, %v; want %+v", argv, got, err, a)
		}
	}
	for _, bad := range [][]string{{}, {"--profile", "p"}, {"--workspace", "/w", "--profile", "p", "extra"}, {"--bogus"}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
