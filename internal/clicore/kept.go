package clicore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/exitcode"
	"github.com/lazaret-dev/lazaret/internal/visible"
)

// Kept sessions, the same on both backends (docs/SESSIONS.md): a shell on
// a terminal, or a --detach start, runs its session's CLI under a keeper
// (clicore/keeper) that holds its terminal; this process attaches to it or
// returns once the session started. Each backend resolves its target
// first, so that a mistake is one line and no keeper is spawned.

// Kept reports whether this process is a kept session's CLI (the inner a
// keeper started): it runs the session itself and spawns no keeper.
func Kept() bool { return os.Getenv(keeper.EnvInner) != "" }

// KeepRequest is one kept start.
type KeepRequest struct {
	IO     IO
	Config *config.Config
	// Profile and Workspace are the resolved target's.
	Profile, Workspace string
	// Backend is the keeper's Info.Backend ("" local, "kubernetes").
	Backend string
	// Invocation is how the user runs this CLI ("lazaret", "lazaret
	// --backend kubernetes"), for the attach line.
	Invocation string
	Detach     bool
	// Inner is the session CLI's argv after the executable (os.Args[1:]).
	Inner []string
	// Env is added to the session CLI's environment.
	Env []string
}

// RunKept spawns r's keeper and attaches this terminal to it or, with
// Detach, prints the session's id once it started (its own exit code when
// it ended first).
func RunKept(ctx context.Context, r KeepRequest) error {
	keys, err := config.ParseDetachKeys(r.Config.Session.DetachKeys)
	if err != nil {
		return err
	}
	rt, err := domain.RuntimeDir()
	if err != nil {
		return err
	}
	stdin, _, _ := r.IO.Files()
	st, err := keeper.Spawn(ctx, keeper.SpawnOptions{
		Dir: domain.KeeperDir(rt), Profile: r.Profile, Workspace: r.Workspace, Backend: r.Backend,
		OnCloseEnd: r.Config.Session.OnClose == config.OnCloseEnd, Detached: r.Detach,
		Size: TerminalSize(stdin), Inner: r.Inner, Env: r.Env,
	})
	if err != nil {
		return err
	}
	if !r.Detach {
		return attachKept(r.IO, r.Invocation, r.Config, keys, keeper.Info{ID: st.ID, Profile: r.Profile, Socket: st.Socket})
	}
	if st.Exited {
		if out := strings.TrimRight(st.Output, "\n "); out != "" {
			fmt.Fprintln(r.IO.ErrOut, out)
		}
		if st.Code == 0 {
			return nil
		}
		return ExitError{Code: st.Code}
	}
	info := keeper.Info{ID: st.ID, Session: st.Session, Profile: r.Profile}
	fmt.Fprintln(r.IO.Out, info.ShortID())
	fmt.Fprintf(r.IO.ErrOut, "lazaret: session %s runs detached; %s takes it back\n", info.ShortID(), AttachLine(r.Invocation, info))
	return nil
}

// TerminalSize is f's size, 24×80 when it is no terminal.
func TerminalSize(f *os.File) keeper.Size {
	if f != nil && term.IsTerminal(int(f.Fd())) {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return keeper.Size{Rows: uint16(min(h, 1000)), Cols: uint16(min(w, 1000))}
		}
	}
	return keeper.Size{Rows: 24, Cols: 80}
}

// AttachLine is the command that attaches to the kept session i.
func AttachLine(invocation string, i keeper.Info) string {
	if i.Profile == "" || i.Profile == config.DefaultProfileName {
		return "`" + invocation + " attach " + i.ShortID() + "`"
	}
	return "`" + invocation + " attach " + i.Profile + " " + i.ShortID() + "`"
}

// AttachKept lends this terminal to the kept session i until it ends (its
// exit code is this process's), the user detaches or another terminal
// takes it over.
func AttachKept(s IO, invocation string, cfg *config.Config, i keeper.Info) error {
	keys, err := config.ParseDetachKeys(cfg.Session.DetachKeys)
	if err != nil {
		return err
	}
	return attachKept(s, invocation, cfg, keys, i)
}

func attachKept(s IO, invocation string, cfg *config.Config, keys []byte, i keeper.Info) error {
	conn, err := net.Dial("unix", i.Socket)
	if err != nil {
		return fmt.Errorf("attaching to session %s: %w", i.ShortID(), err)
	}
	defer conn.Close()
	closing := "detaches it"
	if cfg.Session.OnClose == config.OnCloseEnd {
		closing = "ends it"
	}
	fmt.Fprintf(s.ErrOut, "lazaret: %s detaches this session; closing the terminal %s\n", cfg.Session.DetachKeys, closing)
	stdin, stdout, _ := s.Files()
	res, err := keeper.Attach(conn, stdin, stdout, keys)
	if err != nil {
		return err
	}
	switch {
	case res.Ended:
		if res.Code != 0 {
			return ExitError{Code: res.Code}
		}
		return nil
	case res.TakenOver:
		fmt.Fprintln(s.ErrOut, "\r\nlazaret: detached: attached from another terminal")
	case res.Lost:
		fmt.Fprintf(s.ErrOut, "\r\nlazaret: detached: the session's keeper let this terminal go (too slow?); %s takes it back\n", AttachLine(invocation, i))
	default:
		fmt.Fprintf(s.ErrOut, "\r\nlazaret: detached; %s takes it back\n", AttachLine(invocation, i))
	}
	return nil
}

// KeptList is the kept sessions of backend ("" local), oldest first.
func KeptList(backend string) ([]keeper.Info, error) {
	rt, err := domain.RuntimeDir()
	if err != nil {
		return nil, err
	}
	all, err := keeper.List(domain.KeeperDir(rt))
	if err != nil {
		return nil, err
	}
	return ofBackend(all, backend), nil
}

// ofBackend is the sessions of list that backend's CLI keeps.
func ofBackend(list []keeper.Info, backend string) []keeper.Info {
	var out []keeper.Info
	for _, i := range list {
		if i.Backend == backend {
			out = append(out, i)
		}
	}
	return out
}

// ChooseKept picks the session to attach among list: the one matching
// prefix (of profile when given) or, without a prefix, the one of
// profile's sandbox in workspace (what the backend resolved).
func ChooseKept(list []keeper.Info, invocation, profile, workspace, prefix string) (keeper.Info, error) {
	var match []keeper.Info
	what := "session " + prefix
	if prefix == "" {
		what = "kept session of profile " + profile + " in " + workspace
	}
	for _, i := range list {
		if (prefix != "" && i.Matches(prefix) && (profile == "" || i.Profile == profile)) ||
			(prefix == "" && i.Profile == profile && i.Workspace == workspace) {
			match = append(match, i)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return keeper.Info{}, WithHint(fmt.Errorf("no %s", visible.Line(what)), exitcode.Failure, "`"+invocation+" ps` lists the kept sessions")
	}
	var b strings.Builder
	for _, i := range match {
		fmt.Fprintf(&b, "\n  %s  %s  %s", i.ShortID(), visible.Line(i.Profile), visible.Line(i.Workspace))
	}
	return keeper.Info{}, WithHint(errors.New("several kept sessions match; name one:"+b.String()), exitcode.Usage, invocation+" attach [PROFILE] SESSION")
}

// AttachArgs splits attach's [PROFILE] [SESSION]: one word is a profile
// when the configuration has it, else a session.
func AttachArgs(cfg *config.Config, args []string) (profile, prefix string) {
	switch len(args) {
	case 1:
		if _, ok := cfg.Profiles[args[0]]; ok {
			return args[0], ""
		}
		return "", args[0]
	case 2:
		return args[0], args[1]
	}
	return "", ""
}

// AttachLong is the attach verb's help, the same on both backends.
const AttachLong = `Attach this terminal to a session a keeper holds: a shell that was detached
(its detach keys, a closed terminal, --detach), with its screen redrawn. With
no SESSION, the one kept session of PROFILE (default "default") in this
workspace; SESSION is a prefix of a session id as "lazaret ps" shows it. A
terminal attached before is detached. The detach keys ([session]
detach_keys, default ctrl-\ then d) leave it again.`

// PrintKept lists the kept sessions (attach takes them) with what each
// waits on (pending maps a session id to its pending request ids).
func PrintKept(out io.Writer, list []keeper.Info, pending map[string][]string) error {
	if len(list) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEPT SESSION\tPROFILE\tSTATE\tWAITS ON\tWORKSPACE")
	for _, i := range list {
		state := "detached"
		if i.Attached {
			state = "attached"
		}
		waits := strings.Join(pending[i.Session], " ")
		if waits == "" {
			waits = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", i.ShortID(), visible.Line(i.Profile), state, visible.Line(waits), visible.Line(i.Workspace))
	}
	return tw.Flush()
}

// KeeperLink is a kept session CLI's line to its keeper (the descriptor
// keeper.EnvInner names).
type KeeperLink struct{ f *os.File }

// OpenKeeperLink returns the keeper's line when this process is kept, and
// takes the marker out of the environment: what this CLI starts is not a
// kept session. Call it first, before any child is started.
func OpenKeeperLink() *KeeperLink {
	v := os.Getenv(keeper.EnvInner)
	if v == "" {
		return nil
	}
	_ = os.Unsetenv(keeper.EnvInner)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	return &KeeperLink{f: os.NewFile(uintptr(fd), "keeper")}
}

// KeptState is one of the keeper's state reports.
type KeptState struct {
	Attached, Attention bool
}

// Started tells the keeper the session (id) reached its sandbox, then
// passes each of the keeper's state lines to report, in a goroutine of
// its own, until the keeper's line closes.
func (k *KeeperLink) Started(id string, report func(KeptState)) {
	fmt.Fprintf(k.f, "%s %s\n", keeper.LineStarted, id)
	go func() {
		sc := bufio.NewScanner(k.f)
		sc.Buffer(make([]byte, 64), 64)
		for sc.Scan() {
			var st KeptState
			switch sc.Text() {
			case keeper.StateAttached:
				st.Attached = true
			case keeper.StateDetached:
			case keeper.StateAttention:
				st.Attention = true
			default:
				continue
			}
			report(st)
		}
	}()
}
