package kubecli

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/lazaret-dev/lazaret/internal/atomicfile"
	"github.com/lazaret-dev/lazaret/internal/clicore"
	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/domainlock"
	"github.com/lazaret-dev/lazaret/internal/engine/kubespec"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Resuming a kept cluster session whose lazaret-kube died (killed, out
// of memory, the laptop's power lost): its command goes on in the pod,
// under the pod's terminal keeper, and its escalation requests wait in
// the pod's relay (podterm.go, relaylink.go). While it runs, the session's
// lazaret-kube keeps a record of it in the Domain Root (a reboot keeps
// it) and holds that record's lock; `attach` offers a record whose session
// no keeper holds, and takes it back with a new keeper running
// `lazaret-kube __resume`, which links to the pod's keeper and relay
// again. What died with the old process is made again: the Trust Anchor
// is new (the spec keeps its CA in memory only), and the relay gives the
// sandbox its bundle; the session's public key, which is not secret, is
// in the record, so the holder in the pod goes on signing with its
// delegation. The record is removed when the session's end is final.

// resumeVerb is the hidden verb a keeper runs to take a session back.
const resumeVerb = "__resume"

// maxResumeRecord bounds a record read back.
const maxResumeRecord = 64 << 10

// resumeRecord is one kept cluster session, as its lazaret-kube started
// it.
type resumeRecord struct {
	Session   string   `json:"session"`
	Profile   string   `json:"profile"`
	Workspace string   `json:"workspace"`
	Attempt   string   `json:"attempt,omitempty"`
	Claim     string   `json:"claim"`
	Pod       string   `json:"pod"`
	Command   []string `json:"command"`
	// Public is the Session Anchor's public key (none without Host
	// Escalation): the holder in the pod keeps the private one.
	Public []byte `json:"public,omitempty"`
	// The global flags of the start, given again to __resume.
	Config     string    `json:"config,omitempty"`
	Kubeconfig string    `json:"kubeconfig,omitempty"`
	Context    string    `json:"context,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	Started    time.Time `json:"started"`

	dir string // the record's directory (not stored)
}

func (r *resumeRecord) path() string     { return filepath.Join(r.dir, r.Session+".json") }
func (r *resumeRecord) lockPath() string { return filepath.Join(r.dir, r.Session+".lock") }

// innerArgs is the command line (after the executable) of the keeper's
// inner that takes r back.
func (r *resumeRecord) innerArgs() []string {
	var args []string
	for _, f := range []struct{ name, value string }{
		{"--config", r.Config}, {"--kubeconfig", r.Kubeconfig}, {"--context", r.Context},
		{"--namespace", r.Namespace}, {"--workspace", r.Workspace}, {"--attempt", r.Attempt},
	} {
		if f.value != "" {
			args = append(args, f.name+"="+f.value)
		}
	}
	return append(args, resumeVerb, r.Profile, r.Session)
}

// info is r as a kept session attach can choose (no socket: no keeper).
func (r *resumeRecord) info() keeper.Info {
	return keeper.Info{Session: r.Session, Profile: r.Profile, Workspace: r.Workspace, Backend: backendName,
		Command: r.Command, Started: r.Started}
}

// validSessionID: a session id is 32 lowercase hex characters
// (newSessionID); anything else in a record or an argument is refused
// before it names a file.
func validSessionID(id string) bool {
	b, err := hex.DecodeString(id)
	return err == nil && len(b) == 16 && hex.EncodeToString(b) == id
}

// resumeHold is a running session's hold on its record.
type resumeHold struct {
	rec  *resumeRecord
	lock *domainlock.Lock
}

// holdResume takes the lock of rec (in dir) and writes rec, 0600. An
// error leaves nothing behind.
func holdResume(dir string, rec *resumeRecord) (*resumeHold, error) {
	if err := domain.EnsurePrivateDir(dir); err != nil {
		return nil, err
	}
	rec.dir = dir
	h, err := lockResume(rec)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(rec)
	if err == nil {
		err = atomicfile.Write(rec.path(), data, 0o600)
	}
	if err != nil {
		h.release(true)
		return nil, err
	}
	return h, nil
}

// errResumeTaken is a session whose record another lazaret-kube holds.
var errResumeTaken = errors.New("another lazaret-kube runs it")

func lockResume(rec *resumeRecord) (*resumeHold, error) {
	l, err := domainlock.Open(rec.lockPath())
	if err != nil {
		return nil, err
	}
	ok, err := l.TryLock()
	if err == nil && !ok {
		err = errResumeTaken
	}
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("session %s: %w", rec.Session, err)
	}
	return &resumeHold{rec: rec, lock: l}, nil
}

// takeResume holds the record of session id in dir, for __resume.
func takeResume(dir, id string) (*resumeHold, error) {
	if !validSessionID(id) {
		return nil, clicore.UsageError{Err: fmt.Errorf("%s: %q is not a session id", resumeVerb, id)}
	}
	h, err := lockResume(&resumeRecord{Session: id, dir: dir})
	if err != nil {
		return nil, err
	}
	rec, err := readResume(filepath.Join(dir, id+".json"))
	if err != nil {
		h.release(errors.Is(err, os.ErrNotExist))
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	h.rec = rec
	return h, nil
}

// release lets the record go: removed with final (the session ended, or
// cannot be taken back), kept otherwise for the next lazaret-kube.
func (h *resumeHold) release(final bool) {
	if h == nil {
		return
	}
	if final {
		// The record first: one who locks the new lock file finds none.
		_ = os.Remove(h.rec.path())
		_ = os.Remove(h.rec.lockPath())
	}
	_ = h.lock.Close()
}

// readResume reads and checks one record.
func readResume(path string) (*resumeRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxResumeRecord+1))
	if err != nil {
		return nil, err
	}
	var rec resumeRecord
	if err := json.Unmarshal(data, &rec); err != nil || len(data) > maxResumeRecord {
		return nil, fmt.Errorf("%s: not a session record", path)
	}
	if filepath.Base(path) != rec.Session+".json" || !validSessionID(rec.Session) || rec.Pod == "" ||
		config.ValidProfileName(rec.Profile) != nil || (len(rec.Public) != 0 && len(rec.Public) != ed25519.PublicKeySize) {
		return nil, fmt.Errorf("%s: not a session record", path)
	}
	rec.dir = filepath.Dir(path)
	return &rec, nil
}

// resumables is every kept cluster session recorded under cfg's data
// root that no keeper of live holds and no lazaret-kube runs (its lock is
// free): those attach takes back. A record it cannot read is skipped.
func resumables(cfg *config.Config, live []keeper.Info) ([]*resumeRecord, error) {
	paths, err := filepath.Glob(domain.KubeResumeRecords(cfg.DataRoot))
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, i := range live {
		held[i.Session] = true
	}
	var out []*resumeRecord
	for _, p := range paths {
		rec, err := readResume(p)
		if err != nil || held[rec.Session] {
			continue
		}
		if h, err := lockResume(rec); err == nil {
			h.release(false)
			out = append(out, rec)
		}
	}
	return out, nil
}

// dropResumables removes the records no lazaret-kube holds of the
// sessions of claims, which stop deleted: their pods go with them.
func dropResumables(cfg *config.Config, claims []string) {
	paths, _ := filepath.Glob(domain.KubeResumeRecords(cfg.DataRoot))
	for _, p := range paths {
		rec, err := readResume(p)
		if err != nil || !slices.Contains(claims, rec.Claim) {
			continue
		}
		if h, err := lockResume(rec); err == nil {
			h.release(true)
		}
	}
}

// recordKept records the kept session s (its sio started) and holds the
// record while it runs; nil, with a warning, when it cannot: the session
// then ends with this process.
func (g *globals) recordKept(s podSession, sio *sessionIO) *resumeHold {
	rec := &resumeRecord{Session: sio.sessionID(), Profile: s.t.profile.Name, Workspace: s.t.workspace, Attempt: s.t.attempt,
		Claim: kubespec.ClaimName(s.t.hash), Pod: s.pod, Command: s.command,
		Config: absFlag(g.configPath), Kubeconfig: absFlag(g.kubeconfig), Context: g.context, Namespace: g.namespace,
		Started: time.Now().UTC()}
	if sio.esc != nil {
		rec.Public = sio.esc.public
	}
	a, err := g.anchorOf(s.cfg, s.t)
	var h *resumeHold
	if err == nil {
		h, err = holdResume(a.KubeResumeDir(), rec)
	}
	if err != nil {
		g.log.Warn("this session cannot be taken back if this lazaret-kube ends before it", "err", err)
	}
	return h
}

// absFlag is a path flag made absolute (the keeper that takes the session
// back may run elsewhere).
func absFlag(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

func newResumeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    resumeVerb + " PROFILE SESSION",
		Short:  "Take a kept cluster session back (run by a session keeper for attach)",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE:   func(cmd *cobra.Command, args []string) error { return g.runResume(cmd.Context(), args[0], args[1]) },
	}
}

// runResume takes the kept session id of profile's sandbox back: the
// keeper that runs it is attach's, so what it prints is on the user's
// terminal.
func (g *globals) runResume(ctx context.Context, profile, id string) error {
	keeperLink := clicore.OpenKeeperLink() // first: no child may inherit the marker
	if keeperLink == nil {
		return clicore.UsageError{Err: fmt.Errorf("%s runs under a session keeper: `%s attach` takes a session back", resumeVerb, invocation)}
	}
	cfg, c, t, err := g.clientFor(profile)
	if err != nil {
		return err
	}
	a, err := g.anchorOf(cfg, t)
	if err != nil {
		return err
	}
	h, err := takeResume(a.KubeResumeDir(), id)
	if err != nil {
		return err
	}
	if gone := podGone(ctx, c, h.rec.Pod); gone != nil {
		h.release(true)
		return gone
	}
	gt, err := g.gitTarget(ctx, cfg, t)
	if err != nil {
		h.release(false)
		return err
	}
	// The control socket of the process that died (its lock, now ours,
	// says it is gone).
	if rt, err := domain.RuntimeDir(); err == nil {
		_ = os.Remove(domain.KubeSessionSocket(rt, id))
	}
	fmt.Fprintf(g.io.ErrOut, "lazaret: taking session %s back from pod %s (its lazaret-kube ended)\r\n", h.rec.info().ShortID(), visible.Line(h.rec.Pod))
	return g.runOnPod(ctx, podSession{cfg: cfg, c: c, t: t, pod: h.rec.Pod, command: h.rec.Command, tty: true, gt: gt,
		keeperLink: keeperLink, resume: h})
}
