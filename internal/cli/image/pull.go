package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// ErrUnavailable is wrapped by every error of Ensure about an image that
// is not in local storage and was not pulled.
var ErrUnavailable = errors.New("image not available")

// Unavailable explains why a profile's image is missing. Its message is
// one line naming the profile, where its image is configured and the
// command that fixes it.
type Unavailable struct {
	Profile string
	Image   string
	File    string // configuration file; "" for a built-in profile
	Line    int
	Why     string // what went wrong
	Fix     string // the command to run
}

func (e *Unavailable) Error() string {
	where := ""
	if e.File != "" {
		loc := e.File
		if e.Line > 0 {
			loc += ":" + strconv.Itoa(e.Line)
		}
		where = fmt.Sprintf(" (image set at %s, profiles.%s.image)", loc, e.Profile)
	}
	return clean(fmt.Sprintf("profile %s: image %s %s%s; %s", e.Profile, e.Image, e.Why, where, e.Fix))
}

func (e *Unavailable) Unwrap() error { return ErrUnavailable }

// Ensure makes the image of profile p available locally: nothing to do
// when it is there; an image of a built-in recipe must be built; a
// localhost/ image cannot be pulled; any other image is pulled with
// podman's progress on progress when explicit (`lazaret image pull`) or
// when it is pinned (on start). It reports whether it pulled.
func Ensure(ctx context.Context, pc *podman.Client, p *config.Profile, progress io.Writer, explicit bool) (bool, error) {
	ok, err := pc.ImageExists(ctx, p.Image)
	if err != nil {
		return false, err
	}
	if ok && !explicit {
		return false, nil
	}
	file, line := p.ImageLocation()
	u := &Unavailable{Profile: p.Name, Image: p.Image, File: file, Line: line}
	switch {
	case BuiltIn(p.Image) != "":
		if ok {
			fmt.Fprintf(progress, "==> %s is built here: `lazaret image build %s` rebuilds it\n", p.Image, BuiltIn(p.Image))
			return false, nil
		}
		u.Why, u.Fix = "is not built", "run: lazaret image build "+BuiltIn(p.Image)
		return false, u
	case strings.HasPrefix(p.Image, "localhost/"):
		if ok {
			return false, nil
		}
		u.Why, u.Fix = "is not in local storage and cannot be pulled (localhost/ images are built on this machine)", "build it with podman build -t "+p.Image
		return false, u
	case !explicit && !config.ImagePinned(p.Image):
		u.Why, u.Fix = "is not in local storage and is not pinned, so it is not pulled on start", "run: lazaret image pull "+p.Name
		return false, u
	}
	fmt.Fprintf(progress, "==> pulling %s for profile %s\n", p.Image, p.Name)
	if err := pc.Pull(ctx, p.Image, progress); err != nil {
		u.Why, u.Fix = "cannot be pulled: "+pullReason(err), "where a registry is reachable run: podman pull "+p.Image
		return false, u
	}
	return true, nil
}

// pullReason is a short reason for a failed pull: whether no registry
// could be reached, and podman's last line.
func pullReason(err error) string {
	var pe *podman.Error
	if !errors.As(err, &pe) {
		return err.Error()
	}
	last := strings.TrimSpace(pe.Stderr)
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	last = strings.TrimPrefix(strings.TrimSpace(last), "Error: ")
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	if last == "" {
		last = fmt.Sprintf("podman pull exited with status %d (its output is above)", pe.ExitCode)
	}
	low := strings.ToLower(pe.Stderr)
	for _, s := range []string{"no such host", "dial tcp", "connection refused", "network is unreachable", "i/o timeout",
		"temporary failure in name resolution", "server misbehaving", "pinging container registry", "no route to host"} {
		if strings.Contains(low, s) {
			return "no registry reachable (" + last + ")"
		}
	}
	return last
}

// clean makes s one printable line: a hostile image name or podman
// message cannot forge a second line.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
