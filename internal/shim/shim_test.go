package shim

import (
	"slices"
	"testing"
)

func TestShimArgs(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	flags := ShimFlags("systrap")
	tests := []struct {
		name string
		in   []string
		want []string // after runsc and lazaret's flags
	}{
		{"no args", []string{"lazaret-runsc"}, nil},
		{"version", []string{"lazaret-runsc", "--version"}, []string{"--version"}},
		{
			"create keeps everything",
			[]string{"lazaret-runsc", "--root", "/run/user/1001/runsc", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/p", id},
			[]string{"--root", "/run/user/1001/runsc", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/p", id},
		},
		{
			"conmon exec drops --tty",
			[]string{"lazaret-runsc", "--root=/r", "exec", "--pid-file", "/p", "--process", "/proc.json", "--detach", "--tty", "--console-socket", "/s", id},
			[]string{"--root=/r", "exec", "--pid-file", "/p", "--process", "/proc.json", "--detach", "--console-socket", "/s", id},
		},
		{
			"exec drops -tty and --tty=true",
			[]string{"lazaret-runsc", "exec", "-tty", "--tty=true", id},
			[]string{"exec", id},
		},
		{
			"exec keeps --tty of the contained command",
			[]string{"lazaret-runsc", "exec", "--tty", id, "stty", "--tty"},
			[]string{"exec", id, "stty", "--tty"},
		},
		{
			"exec keeps --tty after --",
			[]string{"lazaret-runsc", "exec", "--", "x", "--tty"},
			[]string{"exec", "--", "x", "--tty"},
		},
		{
			"global value named exec is not the subcommand",
			[]string{"lazaret-runsc", "--root", "exec", "start", "--tty", id},
			[]string{"--root", "exec", "start", "--tty", id},
		},
		{
			"exec --preserve-fds becomes --pass-fd",
			[]string{"lazaret-runsc", "exec", "--pid-file", "/p", "--detach", "--preserve-fds", "2", id},
			[]string{"exec", "--pid-file", "/p", "--detach", "--pass-fd=3:3", "--pass-fd=4:4", id},
		},
		{
			"exec --preserve-fds=1 and 0",
			[]string{"lazaret-runsc", "exec", "--preserve-fds=1", "-preserve-fds=0", id},
			[]string{"exec", "--pass-fd=3:3", id},
		},
		{
			"exec keeps a malformed --preserve-fds for runsc to refuse",
			[]string{"lazaret-runsc", "exec", "--preserve-fds=x", id},
			[]string{"exec", "--preserve-fds=x", id},
		},
		{
			"kill keeps its arguments",
			[]string{"lazaret-runsc", "--root", "/r", "kill", id, "9"},
			[]string{"--root", "/r", "kill", id, "9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ShimArgs("/real/runsc", tt.in, "systrap")
			want := append(append([]string{"/real/runsc"}, flags...), tt.want...)
			if !slices.Equal(got, want) {
				t.Errorf("ShimArgs(%q)\n got %q\nwant %q", tt.in, got, want)
			}
		})
	}
}

func TestShimFlagsComeFirst(t *testing.T) {
	got := ShimArgs("/r", []string{"x", "--root", "/r", "delete", "--force", "id"}, "ptrace")
	if got[1] != "--ignore-cgroups" || got[4] != "--platform=ptrace" || got[5] != "--root" {
		t.Fatalf("global flags not first: %q", got)
	}
}

func FuzzShimArgs(f *testing.F) {
	f.Add("exec", "--tty", "x")
	f.Add("--root", "exec", "--tty")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		in := []string{"lazaret-runsc", a, b, c}
		got := ShimArgs("/r", in, "systrap")
		if len(got) < 5 || got[0] != "/r" {
			t.Fatalf("bad prefix %q", got)
		}
		// Only --tty-like arguments are ever dropped.
		rest := got[5:]
		if len(rest) > 3 {
			t.Fatalf("grew: %q", got)
		}
		dropped := 3 - len(rest)
		n := 0
		for _, s := range in[1:] {
			if isTTYFlag(s) {
				n++
			}
		}
		if dropped > n {
			t.Fatalf("dropped %d non-tty args: %q -> %q", dropped, in, got)
		}
	})
}
