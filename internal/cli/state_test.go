package cli

import (
	"errors"
	"testing"
)

func TestStateResetArgs(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		profile, dir  string
		wantUsageFail bool
	}{
		{nil, "", "", false},
		{[]string{"claude"}, "claude", "", false},
		{[]string{"/usr"}, "", "/usr", false},
		{[]string{"claude", "/var"}, "claude", "/var", false},
		{[]string{"claude", "var"}, "", "", true},
	} {
		p, d, err := stateResetArgs(tc.args)
		var ue usageError
		if tc.wantUsageFail != errors.As(err, &ue) || p != tc.profile || d != tc.dir {
			t.Errorf("stateResetArgs(%q) = %q, %q, %v", tc.args, p, d, err)
		}
	}
}

func TestStateSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := stateSize(n); got != want {
			t.Errorf("stateSize(%d) = %q, want %q", n, got, want)
		}
	}
}
