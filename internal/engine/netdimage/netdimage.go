// Package netdimage is the lazaret-netd image in local storage: its tag
// (bound to the binary's content), its FROM scratch build and the pruning
// of older tags. The CLI (`lazaret image build`) and the coordinator's
// sidecar component (an image missing at start) both use it.
package netdimage

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/locate"
	"github.com/lazaret-dev/lazaret/internal/version"
)

// ImageName is the repository of the sidecar image in local storage.
const ImageName = "localhost/lazaret-netd"

// ImageRef is the tag of the sidecar image for this build of lazaret, so a
// new lazaret never runs an older lazaret-netd (the control protocol and
// rule layout travel together). It is the fallback when no lazaret-netd is
// installed; see InstalledImageRef.
func ImageRef() string { return ImageName + ":" + version.Version }

// ImageRefFor is the tag of the sidecar image holding the lazaret-netd at
// bin: this version and the binary's SHA-256. Such a tag never names
// another binary, so a start needs no podman call to check the image (a
// development build gets a tag of its own; older ones are pruned when a
// new one is built).
func ImageRefFor(bin string) (string, error) { return imageRefFor(bin, loadDigests("")) }

func imageRefFor(bin string, d *digests) (string, error) {
	sum, err := d.sum(bin)
	if err != nil {
		return "", fmt.Errorf("lazaret-netd %s: %w", bin, err)
	}
	if clients := escalationClients(bin); clients != nil {
		// The image also carries the escalation client: its tag names
		// all three binaries.
		h := sha256.New()
		fmt.Fprintf(h, "lazaret-netd %s\n", sum)
		for _, c := range clients {
			cs, err := d.sum(c)
			if err != nil {
				return "", fmt.Errorf("escalation client %s: %w", c, err)
			}
			fmt.Fprintf(h, "%s %s\n", filepath.Base(c), cs)
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	return ImageName + ":" + version.Version + "-" + sum[:contentTagLen], nil
}

// escalationClients are the escalation client's binaries beside the netd
// binary at bin (an installation or `make build` has them), nil when
// either is missing. The image carries them for Kubernetes pods, whose
// init container copies them into the agent's read-only volume
// (internal/engine/netdpod); the local sidecar never runs them.
func escalationClients(bin string) []string {
	dir := filepath.Dir(bin)
	var out []string
	for _, name := range []string{locate.Escalate, locate.EscalateGo} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		out = append(out, p)
	}
	return out
}

// contentTagLen hex digits of the binary's SHA-256 end a content tag.
const contentTagLen = 12

// InstalledImageRef is the sidecar image of the lazaret-netd installed
// beside lazaret, and that binary's path.
func InstalledImageRef() (ref, bin string, err error) {
	bin, err = locate.Find(locate.Netd)
	if err != nil {
		return "", "", err
	}
	// The binaries' sums are remembered in the runtime dir (digests).
	cache := ""
	if rt, err := domain.RuntimeDir(); err == nil {
		cache = filepath.Join(rt, DigestCacheName)
	}
	d := loadDigests(cache)
	ref, err = imageRefFor(bin, d)
	d.save()
	return ref, bin, err
}

// contentTag matches the tags ImageRefFor makes.
var contentTag = regexp.MustCompile(`^` + regexp.QuoteMeta(ImageName) + `:[^:]+-[0-9a-f]{12}$`)

// PruneImages removes the content-tagged sidecar images other than keep,
// and untagged sidecar images (a tag rebuilt in place leaves its old image
// behind with no name); one still used by a running sidecar stays (podman
// refuses, which is not an error here).
func PruneImages(ctx context.Context, pc *podman.Client, keep string) {
	refs, err := pc.ImageRefs(ctx, ImageName)
	if err != nil {
		return
	}
	for _, ref := range refs {
		if ref != keep && contentTag.MatchString(ref) {
			_ = pc.RemoveUnusedImage(ctx, ref)
		}
	}
	// Only dangling images are pruned; the label keeps it to lazaret-netd's.
	_ = pc.PruneDanglingImages(ctx, imageTitleLabel+"="+imageTitle)
}

// The title label every sidecar image carries (containerfile).
const (
	imageTitleLabel = "org.opencontainers.image.title"
	imageTitle      = "lazaret-netd"
)

// containerfile builds an image that holds nothing but the static binary:
// no shell, no libc, nothing for an attacker who reached the sidecar to use.
const containerfile = `FROM scratch
COPY lazaret-netd /lazaret-netd
%s
LABEL %s=%q lazaret.version=%q lazaret.netd.sha256=%q
USER 0:0
ENTRYPOINT ["/lazaret-netd"]
`

// ErrNotStatic is returned when the netd binary is dynamically linked: it
// could not run in a FROM scratch image.
var ErrNotStatic = errors.New("not a statically linked executable")

// BuildImage builds the sidecar image tag (ImageRef() when empty) from the
// lazaret-netd binary at netdBinary, FROM scratch and without network
// access. It is what `lazaret image build` and scripts/setup call.
func BuildImage(ctx context.Context, pc *podman.Client, netdBinary, tag string) error {
	if tag == "" {
		tag = ImageRef()
	}
	if err := checkStatic(netdBinary); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lazaret-netd-build-")
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := copyFile(netdBinary, filepath.Join(dir, "lazaret-netd")); err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	var extra strings.Builder
	for _, c := range escalationClients(netdBinary) {
		if err := checkStatic(c); err != nil {
			return err
		}
		name := filepath.Base(c)
		if err := copyFile(c, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("build context: %w", err)
		}
		fmt.Fprintf(&extra, "COPY %s /%s\n", name, name)
	}
	sum, err := fileSHA256(netdBinary)
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	cf := filepath.Join(dir, "Containerfile")
	if err := os.WriteFile(cf, fmt.Appendf(nil, containerfile, extra.String(), imageTitleLabel, imageTitle, version.Version, sum), 0o644); err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	// --network none: the build must never need a registry or the network;
	// FROM scratch has nothing to pull.
	if err := pc.BuildImage(ctx, podman.BuildOptions{ContextDir: dir, Containerfile: cf, Tag: tag, NoLayers: true}); err != nil {
		return fmt.Errorf("build sidecar image %s: %w", tag, err)
	}
	return nil
}

// BinaryLabel is the image label holding the SHA-256 of the lazaret-netd
// inside, so a changed binary (a development build) is noticed.
const BinaryLabel = "lazaret.netd.sha256"

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s binary %s: %w", filepath.Base(path), path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return fmt.Errorf("%s binary %s: %w (build it with CGO_ENABLED=0)", filepath.Base(path), path, ErrNotStatic)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
