package refsync

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
)

// The sandbox answers a sync request with one stream on stdout:
//
//	<oid> refs/heads/<branch>\n   (git for-each-ref, zero or more)
//	\n
//	<git bundle v2 or v3, or nothing when there are no new objects>
//
// All of it is written by software the agent controls, so it is parsed
// here as hostile input: bounded line lengths and counts, strict syntax,
// ref names validated before they are mapped to host refs.

const (
	maxLine = 4096
	maxRefs = 10000
)

var errNoBundle = errors.New("no bundle in the stream")

// readLine reads one \n-terminated line of at most maxLine bytes and
// returns it without the newline. A final line without newline is an error
// (a truncated stream).
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > maxLine {
			return "", fmt.Errorf("line longer than %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(buf) > 0 {
				return "", io.ErrUnexpectedEOF
			}
			return "", err
		}
		return string(buf[:len(buf)-1]), nil
	}
}

// CloneRef is one branch tip reported by the sandbox.
type CloneRef struct {
	Name string // refs/heads/<branch>
	OID  string
}

// parseRefLine parses "<oid> <refname>" with an oid of length oidLen.
func parseRefLine(line string, oidLen int) (CloneRef, error) {
	oid, name, ok := strings.Cut(line, " ")
	if !ok || !gitrepo.ValidOID(oid, oidLen) {
		return CloneRef{}, fmt.Errorf("bad ref line %q", line)
	}
	branch, ok := strings.CutPrefix(name, "refs/heads/")
	if !ok {
		return CloneRef{}, fmt.Errorf("ref %q is not a branch", name)
	}
	if err := gitrepo.ValidBranch(branch); err != nil {
		return CloneRef{}, err
	}
	return CloneRef{Name: name, OID: oid}, nil
}

// parseOrSkip parses a ref line; a well-formed line (valid object name, a
// space, then anything) whose ref lazaret refuses is skipped rather than
// failing the stream: one branch with an unacceptable name must not stop
// the sync of the others.
func parseOrSkip(line string, oidLen int) (r CloneRef, skip bool, err error) {
	r, err = parseRefLine(line, oidLen)
	if err == nil {
		return r, false, nil
	}
	oid, _, ok := strings.Cut(line, " ")
	if !ok || !gitrepo.ValidOID(oid, oidLen) {
		return CloneRef{}, false, err
	}
	return CloneRef{}, true, nil
}

// SkippedRef splits a skipped ref line into object and name (as the
// sandbox wrote it: hostile, escape before display).
func SkippedRef(line string) (oid, name string) {
	oid, name, _ = strings.Cut(line, " ")
	return oid, name
}

// ReadRefList reads the ref section up to its empty line. Lines that are
// well formed but name refs lazaret does not accept are returned in
// skipped, so the caller can log them; a malformed line fails the whole
// stream.
func ReadRefList(br *bufio.Reader, oidLen int) (refs []CloneRef, skipped []string, err error) {
	seen := map[string]bool{}
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, nil, fmt.Errorf("ref list: %w", err)
		}
		if line == "" {
			return refs, skipped, nil
		}
		if len(refs)+len(skipped) >= maxRefs {
			return nil, nil, fmt.Errorf("ref list: more than %d refs", maxRefs)
		}
		r, skip, err := parseOrSkip(line, oidLen)
		if err != nil {
			return nil, nil, fmt.Errorf("ref list: %w", err)
		}
		if skip {
			skipped = append(skipped, line)
			continue
		}
		if seen[r.Name] {
			return nil, nil, fmt.Errorf("ref list: %s listed twice", r.Name)
		}
		seen[r.Name] = true
		refs = append(refs, r)
	}
}

// BundleHeader is the parsed header of a git bundle.
type BundleHeader struct {
	Version       int
	Prerequisites []string
	Refs          []CloneRef
	// Skipped are well-formed ref lines whose names lazaret refuses.
	Skipped []string
}

// ReadBundleHeader reads a bundle header (through its empty line), leaving
// br at the first byte of the pack. It returns errNoBundle when the stream
// ends before any byte of a bundle (git refused to create an empty one).
func ReadBundleHeader(br *bufio.Reader, objectFormat string) (*BundleHeader, error) {
	oidLen := 40
	if objectFormat == "sha256" {
		oidLen = 64
	}
	if _, err := br.Peek(1); err == io.EOF {
		return nil, errNoBundle
	}
	sig, err := readLine(br)
	if err != nil {
		return nil, noBundleOn(err, "bundle")
	}
	h := &BundleHeader{}
	switch sig {
	case "# v2 git bundle":
		h.Version = 2
		if objectFormat != "sha1" {
			return nil, fmt.Errorf("bundle: v2 bundle for a %s repository", objectFormat)
		}
	case "# v3 git bundle":
		h.Version = 3
	default:
		return nil, fmt.Errorf("bundle: bad signature %q", sig)
	}
	format := "sha1"
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, noBundleOn(err, "bundle header")
		}
		if line == "" {
			break
		}
		if len(h.Prerequisites)+len(h.Refs)+len(h.Skipped) >= maxRefs {
			return nil, fmt.Errorf("bundle header: more than %d entries", maxRefs)
		}
		switch {
		case h.Version == 3 && strings.HasPrefix(line, "@"):
			if len(h.Prerequisites)+len(h.Refs) > 0 {
				return nil, fmt.Errorf("bundle header: capability %q after refs", line)
			}
			k, v, _ := strings.Cut(line[1:], "=")
			switch k {
			case "object-format":
				format = v
			default:
				// @filter (partial bundles) and anything newer: refuse
				// rather than import an incomplete pack.
				return nil, fmt.Errorf("bundle header: unsupported capability %q", line)
			}
		case strings.HasPrefix(line, "-"):
			oid, _, _ := strings.Cut(line[1:], " ")
			if !gitrepo.ValidOID(oid, oidLen) {
				return nil, fmt.Errorf("bundle header: bad prerequisite %q", line)
			}
			h.Prerequisites = append(h.Prerequisites, oid)
		default:
			r, skip, err := parseOrSkip(line, oidLen)
			if err != nil {
				return nil, fmt.Errorf("bundle header: %w", err)
			}
			if skip {
				h.Skipped = append(h.Skipped, line)
				continue
			}
			h.Refs = append(h.Refs, r)
		}
	}
	if format != objectFormat {
		return nil, fmt.Errorf("bundle: object format %s, repository uses %s", format, objectFormat)
	}
	if _, err := br.Peek(1); err == io.EOF {
		return nil, errNoBundle
	}
	magic, err := br.Peek(4)
	if err != nil || !bytes.Equal(magic, []byte("PACK")) {
		return nil, fmt.Errorf("bundle: no pack after the header")
	}
	return h, nil
}

// noBundleOn maps the end of the stream inside a bundle header to
// errNoBundle: git writes the signature line before it refuses to create
// an empty bundle. Nothing has been imported at that point, and tips
// whose objects the host lacks then fail the connectivity check.
func noBundleOn(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errNoBundle
	}
	return fmt.Errorf("%s: %w", what, err)
}
