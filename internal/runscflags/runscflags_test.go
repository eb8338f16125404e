package runscflags

import "testing"

func TestPlatformFor(t *testing.T) {
	full := "kill_process kill_thread trap errno user_notif trace log allow\n"
	if p := platformFor(full, "amd64"); p != PlatformSystrap {
		t.Errorf("amd64 with trap: %s", p)
	}
	if p := platformFor("kill_process kill_thread errno allow", "amd64"); p != PlatformPtrace {
		t.Errorf("no trap: %s", p)
	}
	if p := platformFor(full, "riscv64"); p != PlatformPtrace {
		t.Errorf("riscv64: %s", p)
	}
	if p := platformFor("", "arm64"); p != PlatformPtrace {
		t.Errorf("empty: %s", p)
	}
}
