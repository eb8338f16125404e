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

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
)

// RecipeLabel is the label that records which recipe built an image, so a
// changed recipe rebuilds and an unchanged one is skipped.
const RecipeLabel = "lazaret.recipe"

// DefaultSuite is the Debian release of the default image.
const DefaultSuite = "bookworm"

// AgentImage is the agent-ready image (`lazaret image build agent`).
const AgentImage = "localhost/lazaret-agent:latest"

// AgentSuite is the Debian release of the agent image: the first one
// whose nodejs is at least 22 (on the mirror, 2026-12: bookworm 18,
// trixie 20, forky 24.21 with npm 12.2, sid 24.22). forky is testing,
// which moves less than sid.
const AgentSuite = "forky"

// slim are mmdebstrap options shared by every recipe: no documentation,
// man pages, locales or apt lists in the image.
var slim = []string{
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-exclude=/usr/share/locale/*",
	"--dpkgopt=path-include=/usr/share/locale/locale.alias",
	"--dpkgopt=path-exclude=/usr/share/info/*",
}

// defaultRecipe is the mmdebstrap invocation (after the output path is
// appended) of the default image: Debian minbase with git and
// ca-certificates, without documentation, man pages, locales or apt lists.
var defaultRecipe = append(append([]string{"--mode=unshare", "--variant=minbase", "--include=git,ca-certificates"}, slim...),
	`--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin`,
	DefaultSuite,
)

// agentRecipe is the agent image: the default image's tools plus curl,
// procps (ps) and Node.js with npm from Debian. Testing's Release files
// carry a Valid-Until date; a mirror that serves a frozen snapshot (as
// this project's test machines do) has expired ones, so the build accepts
// them (they are still signed) and removes the option from the image,
// whose apt stays strict.
var agentRecipe = append(append([]string{"--mode=unshare", "--variant=minbase",
	"--include=git,ca-certificates,curl,procps,nodejs,npm",
	`--aptopt=Acquire::Check-Valid-Until "false"`}, slim...),
	`--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/etc/apt/apt.conf.d/99mmdebstrap`,
	AgentSuite,
)

var defaultChanges = []string{
	`CMD ["/bin/bash"]`,
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"ENV LANG=C.UTF-8",
	"WORKDIR /workspace",
}

// A recipe is one locally built Debian image.
type recipe struct {
	name, ref, summary string
	args, changes      []string
}

// Recipes are the images `lazaret image build NAME` builds.
func recipes() map[string]recipe {
	return map[string]recipe{
		"default": {"default", config.DefaultImage, "Debian " + DefaultSuite + " minbase + git + ca-certificates (about a minute)", defaultRecipe, defaultChanges},
		"agent": {"agent", AgentImage, "Debian " + AgentSuite + " minbase + git, ca-certificates, curl, procps, nodejs, npm (2 to 7 minutes)",
			agentRecipe, defaultChanges},
	}
}

// Names lists the recipes `lazaret image build` knows.
func Names() []string { return []string{"default", "agent"} }

// BuiltIn returns the recipe name that builds ref, or "" when no recipe
// does (an image to pull, or one the user builds).
func BuiltIn(ref string) string {
	for _, r := range recipes() {
		if r.ref == ref {
			return r.name
		}
	}
	return ""
}

func (r recipe) hash() string {
	h := sha256.New()
	for _, s := range append(append([]string{}, r.args...), r.changes...) {
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
func (b *Builder) BuildDefault(ctx context.Context) error { return b.Build(ctx, "default") }

// Build builds the image of the named recipe ("default" or "agent")
// unless an image of the same recipe exists.
func (b *Builder) Build(ctx context.Context, name string) error {
	r, ok := recipes()[name]
	if !ok {
		return fmt.Errorf("no image recipe %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	ref, hash := r.ref, r.hash()
	if ok, err := b.upToDate(ctx, ref, RecipeLabel, hash); err != nil {
		return err
	} else if ok {
		b.logf("%s is up to date (recipe %s)", ref, hash)
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

	b.logf("building %s: %s", ref, r.summary)
	args := append(append([]string{}, r.args...), tarball)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	progress := &progressWriter{w: b.Progress}
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap %s failed: %w: %s", r.args[len(r.args)-1], err, progress.tail())
	}
	b.logf("importing %s", ref)
	changes := append(append([]string{}, r.changes...), "LABEL "+RecipeLabel+"="+hash)
	if err := b.Podman.ImportImage(ctx, tarball, ref, changes); err != nil {
		return err
	}
	b.logf("%s built (recipe %s)", ref, hash)
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
