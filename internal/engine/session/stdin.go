package session

import (
	"fmt"
	"strings"
)

// HolderReady is what the session holder writes on its stdout in --stdin
// mode (the Kubernetes backend: an exec through the API server passes no
// descriptor) once it is non-dumpable and, on a terminal, has turned echo
// off; only then does the CLI send StdinFrame. An APC string, which a
// terminal would not show. cmd/lazaret-escalate/holder.c holds the same.
const HolderReady = "\x1b_lazaret-holder-ready\x1b\\"

// HolderStdinFlag selects the holder's --stdin mode.
const HolderStdinFlag = "--stdin"

// maxStdinFrame is the largest frame the holder accepts (its buffer).
const maxStdinFrame = 16384 - 1

// StdinFrame is the delegation as the holder reads it in --stdin mode: 4
// hex digits of length, then Env's NAME=VALUE lines (what descriptor 3
// carries locally). It holds the delegated key: write it only to the
// holder's stdin, after HolderReady.
func (d *Delegated) StdinFrame() ([]byte, error) {
	body := strings.Join(d.Env(), "\n") + "\n"
	if len(body) > maxStdinFrame {
		return nil, fmt.Errorf("delegation of %d bytes is too long for the holder", len(body))
	}
	return fmt.Appendf(nil, "%04x%s", len(body), body), nil
}
