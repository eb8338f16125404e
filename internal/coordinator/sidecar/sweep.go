package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/domainlock"
)

// NetnsRemover unpins a network namespace (netns.Client.Remove).
type NetnsRemover interface {
	Remove(ctx context.Context, path string) error
}

// domainHash is what follows "netns-" or "netd-" in a name the runtime
// dir holds for a domain (domain.Hash).
var domainHash = regexp.MustCompile(`^[0-9a-f]{12}$`)

// SweepEndedSpares removes the namespace pin and the control socket that
// another domain's spare sidecar left in the runtime dir when it expired
// unclaimed. netd exits and podman removes its container (--rm), but the
// pin, a bind mount in podman's mount namespace, keeps an empty namespace
// alive until that domain starts again or is stopped, which may be never.
// own is the calling coordinator's domain, which it never touches.
//
// A domain is swept only under its hold-to-bind lock (taken without
// waiting) and only when neither its coordinator nor a netd answers on its
// sockets: a domain that is starting, running, tearing down or has a
// spare waiting keeps everything. It returns how many domains it swept.
func SweepEndedSpares(ctx context.Context, runtimeDir, own string, pm NetnsRemover, log *slog.Logger) int {
	entries, err := os.ReadDir(runtimeDir)
	if err != nil {
		log.Warn("sweeping ended spares", "err", err)
		return 0
	}
	seen := map[string]bool{own: true}
	swept := 0
	for _, e := range entries {
		name := e.Name()
		hash, ok := strings.CutPrefix(name, "netns-")
		if !ok {
			if hash, ok = strings.CutPrefix(name, "netd-"); ok {
				hash, ok = strings.CutSuffix(hash, ".sock")
			}
		}
		if !ok || !domainHash.MatchString(hash) || seen[hash] {
			continue
		}
		seen[hash] = true
		if ctx.Err() != nil {
			break
		}
		a := &domain.Anchor{RuntimeDir: runtimeDir, Hash: hash}
		done, err := sweepDomain(ctx, a, pm)
		if err != nil {
			log.Warn("sweeping an ended spare", "domain", hash, "err", err)
		}
		if done {
			log.Info("removed what an ended spare left", "domain", hash)
			swept++
		}
	}
	return swept
}

// sweepDomain removes a's netd socket and namespace pin when nothing of a
// is alive; done reports that it did.
func sweepDomain(ctx context.Context, a *domain.Anchor, pm NetnsRemover) (done bool, err error) {
	// Cheap checks first: most entries belong to a live domain or its
	// waiting spare, whose lock is not worth taking.
	if answers(a.NetdSocket()) || answers(a.ControlSocket()) {
		return false, nil
	}
	lock, err := domainlock.Open(a.LockFile())
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if ok, err := lock.TryLock(); err != nil || !ok {
		return false, err // a start or a maintenance action is under way
	}
	defer lock.Unlock()
	// Again under the lock: a start that took and released it meanwhile
	// has its coordinator answering by now.
	if answers(a.NetdSocket()) || answers(a.ControlSocket()) {
		return false, nil
	}
	var errs []error
	if fi, err := os.Lstat(a.NetdSocket()); err == nil && fi.Mode().Type() == os.ModeSocket {
		if err := os.Remove(a.NetdSocket()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if _, err := os.Lstat(a.Netns()); err == nil {
		if err := pm.Remove(ctx, a.Netns()); err != nil {
			errs = append(errs, err)
		}
	}
	return len(errs) == 0, errors.Join(errs...)
}

// answers reports whether something accepts connections on the UNIX
// socket at path. Only a refused connection or a missing file is an
// answer of "nothing": any other failure counts as alive, so that a
// sweep errs on the side of leaving things.
func answers(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist)
}
