// Package cabundle reads a PEM trust store (a CA bundle such as the host's
// /etc/ssl/certs/ca-certificates.crt) and keeps only its certificates, so
// that nothing but public certificates ever reaches a sandbox.
package cabundle

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSize bounds a bundle: Debian's is about 220 KB; a path that names a
// device or a huge file must not be read forever.
const MaxSize = 8 << 20

// ErrNotBundle is wrapped by every error about a file's content.
var ErrNotBundle = errors.New("not a PEM certificate bundle")

// Filter returns the CERTIFICATE blocks of data, PEM-encoded again, and
// how many there are. Text between blocks is dropped; other block types
// (CRLs, parameters) are skipped. A private key is an error: a file that
// holds one is not a trust store, and naming it was a mistake.
func Filter(data []byte) ([]byte, int, error) {
	var out bytes.Buffer
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			if len(b.Bytes) == 0 {
				continue
			}
			// Headers are dropped: only the DER bytes go on.
			if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}); err != nil {
				return nil, 0, err
			}
			n++
		case strings.Contains(b.Type, "PRIVATE KEY"):
			return nil, 0, fmt.Errorf("%w: contains a private key (%s block)", ErrNotBundle, b.Type)
		}
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("%w: no PEM CERTIFICATE block", ErrNotBundle)
	}
	return out.Bytes(), n, nil
}

// Load reads path, which must be a readable regular file of at most
// MaxSize bytes (checked on the opened file), and filters it.
func Load(path string) ([]byte, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > MaxSize {
		return nil, 0, fmt.Errorf("%s: larger than %d bytes", path, MaxSize)
	}
	pemData, n, err := Filter(data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return pemData, n, nil
}
