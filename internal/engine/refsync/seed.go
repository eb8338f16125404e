package refsync

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/adapter/hostgit"
	"github.com/lazaret-dev/lazaret/internal/engine/gitrepo"
	"github.com/lazaret-dev/lazaret/internal/execx"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// seedScript runs in a sandbox that has no host repository to share
// objects with (the Kubernetes backend): it says whether /workspace is
// already a clone ("present") or not ("need"); in the latter case it
// reads a bundle of the host's branches on stdin and makes the clone on
// the agent branch. $1 is the object format, $2 the agent branch, the rest
// are fetch refspecs out of the bundle.
const seedScript = `if [ -e /workspace/.git ]; then echo present; exit 0; fi
echo need
set -e
b=$(mktemp)
trap 'rm -f "$b"' EXIT
cat > "$b"
fmt=$1 branch=$2
shift 2
git init -q --template= --object-format="$fmt" --initial-branch="$branch" /workspace
git -C /workspace fetch -q --update-head-ok "$b" "$@"
git -C /workspace checkout -q -f "$branch"
echo seeded`

// ErrSeedFailed: the sandbox did not make its clone.
var ErrSeedFailed = errors.New("the sandbox could not make its clone")

// Seed makes the sandbox's clone from the host repository when it has
// none: the agent branch (its host tip, or the host's HEAD when it has
// none yet) and the agent's side branches, sent as a bundle, so the
// sandbox never sees the host repository itself. It then creates the
// host's agent branch at the start commit if missing, as the local Git
// Sentry does. It reports whether it seeded and the start commit.
func Seed(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, m gitrepo.RefMap, sb Sandbox) (seeded bool, start string, err error) {
	src, start, err := seedSource(ctx, g, repo, m)
	if err != nil {
		return false, "", err
	}
	refs, specs := []string{src}, []string{src + ":refs/heads/" + m.AgentBranch()}
	side, err := gitrepo.ListSideBranches(ctx, g, repo, m)
	if err != nil {
		return false, "", err
	}
	for _, b := range side {
		if gitrepo.ValidBranch(b.Name) == nil && b.Name != m.AgentBranch() {
			refs = append(refs, b.Ref)
			specs = append(specs, b.Ref+":refs/heads/"+b.Name)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	argv := append([]string{"sh", "-c", seedScript, "seed", repo.ObjectFormat, m.AgentBranch()}, specs...)
	p, err := sb.Start(ctx, argv)
	if err != nil {
		return false, "", err
	}
	seeded, err = seedOver(ctx, g, repo, refs, p)
	if err != nil || !seeded {
		return false, start, err
	}
	// Create the host branch if missing (never move an existing one).
	err = g.CreateLoggedRef(ctx, repo.Common(), "lazaret: agent branch created", m.AgentRef(), start)
	if err != nil && repo.ResolveRef(ctx, g, m.AgentRef()) == "" {
		return true, start, fmt.Errorf("creating %s: %w", m.AgentRef(), err)
	}
	return true, start, nil
}

// seedSource is where the agent branch starts: its host tip, else HEAD.
func seedSource(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, m gitrepo.RefMap) (src, start string, err error) {
	if start = repo.ResolveRef(ctx, g, m.AgentRef()); start != "" {
		return m.AgentRef(), start, nil
	}
	head, err := repo.Head(ctx, g)
	if err != nil {
		return "", "", err
	}
	return "HEAD", head, nil
}

// seedOver answers the seed script: the bundle when it needs one.
func seedOver(ctx context.Context, g *hostgit.Git, repo *gitrepo.HostRepo, refs []string, p *Proc) (bool, error) {
	out := bufio.NewReader(io.LimitReader(p.Stdout, 4096))
	first, _ := out.ReadString('\n')
	switch strings.TrimSpace(first) {
	case "present":
		_ = p.Stdin.Close()
		return false, waitDrained(p, out)
	case "need":
	default:
		_ = p.Stdin.Close()
		_ = waitDrained(p, out)
		return false, fmt.Errorf("%w: %s", ErrSeedFailed, visible.Line(execx.LastLine(p.Stderr.String())))
	}
	var gitErr execx.TailBuffer
	gitErr.Max = 4096
	berr := g.BundleCreate(ctx, repo.TopLevel, p.Stdin, &gitErr, refs...)
	_ = p.Stdin.Close()
	rest, _ := io.ReadAll(out)
	werr := p.Wait()
	if berr != nil {
		return false, fmt.Errorf("bundling the host's branches for the sandbox: %w", berr)
	}
	if werr != nil || strings.TrimSpace(string(rest)) != "seeded" {
		return false, fmt.Errorf("%w: %s", ErrSeedFailed, visible.Line(execx.LastLine(p.Stderr.String())))
	}
	return true, nil
}

func waitDrained(p *Proc, out io.Reader) error {
	_, _ = io.Copy(io.Discard, out)
	_, _ = io.Copy(io.Discard, p.Stdout)
	return p.Wait()
}
