package statestore

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo, reduced to what the sweep
// needs.
type Mount struct {
	ID         int
	MountPoint string // unescaped
	FSType     string
	Source     string
}

// ParseMountinfo parses the text of /proc/<pid>/mountinfo (proc(5)). The
// text comes from a process in podman's namespace and is treated as
// untrusted: a malformed line is an error naming its number.
func ParseMountinfo(data []byte) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		m, err := parseMountinfoLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n, err)
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return mounts, nil
}

// A line is: ID parentID major:minor root mountpoint options
// [optional fields...] - fstype source superoptions.
func parseMountinfoLine(line string) (Mount, error) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+3 {
		return Mount{}, fmt.Errorf("malformed line %q", line)
	}
	var m Mount
	if _, err := fmt.Sscanf(fields[0], "%d", &m.ID); err != nil {
		return Mount{}, fmt.Errorf("mount id %q: %w", fields[0], err)
	}
	mp, err := unescapeOctal(fields[4])
	if err != nil {
		return Mount{}, fmt.Errorf("mount point %q: %w", fields[4], err)
	}
	if !strings.HasPrefix(mp, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", mp)
	}
	m.MountPoint = mp
	m.FSType = fields[sep+1]
	m.Source, _ = unescapeOctal(fields[sep+2])
	return m, nil
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline
// and backslash in mountinfo paths.
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape")
		}
		v := 0
		for _, c := range s[i+1 : i+4] {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("bad escape %q", s[i:i+4])
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("bad escape %q", s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// MountsUnder returns the mounts whose mount point is dir or below it,
// deepest first, so that unmounting them in order never hits a busy parent.
func MountsUnder(mounts []Mount, dir string) []Mount {
	var out []Mount
	for _, m := range mounts {
		if Within(m.MountPoint, dir) {
			out = append(out, m)
		}
	}
	// Deeper paths and later (stacked) mounts first.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func less(a, b Mount) bool {
	da, db := strings.Count(a.MountPoint, "/"), strings.Count(b.MountPoint, "/")
	if da != db {
		return da > db
	}
	return a.ID > b.ID
}
