// Package image builds lazaret's local images without any container
// registry: the default agent image from Debian packages (mmdebstrap in a
// user namespace, so no root is needed) and the network sidecar image.
package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/config"
	"github.com/lazaret-dev/lazaret/internal/podman"
)

// RecipeLabel is the label that records which recipe built an image, so a
// changed recipe rebuilds and an unchanged one is skipped.
const RecipeLabel = "lazaret.recipe"

// DefaultSuite is the Debian release of the default image.
const DefaultSuite = "bookworm"

// defaultRecipe is the mmdebstrap invocation (after the output path is
// appended) of the default image: Debian minbase with git and
// ca-certificates, without documentation, man pages, locales or apt lists.
var defaultRecipe = []string{
	"--mode=unshare", "--variant=minbase", "--include=git,ca-certificates",
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-exclude=/usr/share/locale/*",
	"--dpkgopt=path-include=/usr/share/locale/locale.alias",
	"--dpkgopt=path-exclude=/usr/share/info/*",
	`--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin`,
	DefaultSuite,
}

var defaultChanges = []string{
	`CMD ["/bin/bash"]`,
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"ENV LANG=C.UTF-8",
	"WORKDIR /workspace",
}

// Recipe returns the hash identifying the default image's recipe.
func Recipe() string {
	h := sha256.New()
	for _, s := range append(append([]string{}, defaultRecipe...), defaultChanges...) {
		fmt.Fprintf(h, "%s\x00", s)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Builder builds images into the user's rootless podman storage.
type Builder struct {
	Podman *podman.Client
	// Progress receives one line per step and the build tools' output.
	Progress io.Writer
	// Force rebuilds even when an up-to-date image exists.
	Force bool
}

func (b *Builder) logf(format string, args ...any) {
	fmt.Fprintf(b.Progress, "==> "+format+"\n", args...)
}

// upToDate reports whether ref exists with label key=value.
func (b *Builder) upToDate(ctx context.Context, ref, key, value string) (bool, error) {
	if b.Force {
		return false, nil
	}
	exists, err := b.Podman.ImageExists(ctx, ref)
	if err != nil || !exists {
		return false, err
	}
	info, err := b.Podman.InspectImage(ctx, ref)
	if err != nil {
		return false, err
	}
	return info.Labels[key] == value, nil
}

// BuildDefault builds config.DefaultImage unless an image of the same
// recipe exists.
func (b *Builder) BuildDefault(ctx context.Context) error {
	ref, recipe := config.DefaultImage, Recipe()
	if ok, err := b.upToDate(ctx, ref, RecipeLabel, recipe); err != nil {
		return err
	} else if ok {
		b.logf("%s is up to date (recipe %s)", ref, recipe)
		return nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("building %s needs mmdebstrap (apt-get install mmdebstrap, or run scripts/setup): %w", ref, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	if err := os.MkdirAll(filepath.Join(cache, "lazaret"), 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(cache, "lazaret"), "image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tarball := filepath.Join(tmp, "rootfs.tar")

	b.logf("building %s: Debian %s minbase + git + ca-certificates (about a minute)", ref, DefaultSuite)
	args := append(append([]string{}, defaultRecipe...), tarball)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	progress := &progressWriter{w: b.Progress}
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap %s failed: %w: %s", DefaultSuite, err, progress.tail())
	}
	b.logf("importing %s", ref)
	changes := append(append([]string{}, defaultChanges...), "LABEL "+RecipeLabel+"="+recipe)
	if err := b.Podman.ImportImage(ctx, tarball, ref, changes); err != nil {
		return err
	}
	b.logf("%s built (recipe %s)", ref, recipe)
	return nil
}

// progressWriter relays mmdebstrap's "I: …" progress lines, indented, and
// keeps the last lines for an error message. exec.Cmd serialises writes
// when Stdout and Stderr are the same writer.
type progressWriter struct {
	w       io.Writer
	partial []byte
	last    []string
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.partial[:i])
		p.partial = p.partial[i+1:]
		p.last = append(p.last, line)
		if len(p.last) > 5 {
			p.last = p.last[1:]
		}
		if strings.HasPrefix(line, "I: ") || strings.HasPrefix(line, "E: ") || strings.HasPrefix(line, "W: ") {
			fmt.Fprintf(p.w, "    %s\n", line)
		}
	}
}

func (p *progressWriter) tail() string { return strings.Join(p.last, " | ") }
