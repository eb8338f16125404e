package escclient

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lazaret-dev/lazaret/internal/wire/escrelay"
)

// InstallMain copies the escalation client beside this executable (the C
// front end and this program, in the netd image) into DIR, mode 0555:
// the init container of a cluster pod fills the volume the agent mounts
// read-only (internal/engine/netdpod).
func InstallMain(args []string, stderr io.Writer) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintf(stderr, "usage: lazaret-escalate-go %s DIR\n", escrelay.InstallVerb)
		return ExitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "lazaret-escalate: install: %v\n", err)
		return ExitFailure
	}
	for _, name := range []string{escrelay.FrontEndBinary, escrelay.InstallerBinary} {
		if err := installFile(filepath.Join(filepath.Dir(self), name), filepath.Join(args[0], name)); err != nil {
			fmt.Fprintf(stderr, "lazaret-escalate: install: %v\n", err)
			return ExitFailure
		}
	}
	return 0
}

func installFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", dst, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
