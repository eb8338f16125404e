package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lazaret-dev/lazaret/internal/clicore/keeper"
	"github.com/lazaret-dev/lazaret/internal/engine/config"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/wire/ctl"
	"golang.org/x/term"
)

// kept reports whether this process is a kept session's CLI (the inner a
// keeper started): it runs the session itself and spawns no keeper.
func kept() bool { return os.Getenv(keeper.EnvInner) != "" }

// keptSession runs r through a session keeper: the keeper runs this same
// command line as the session's CLI on a terminal of its own; this
// process attaches to it (a shell on a terminal) or, with detach,
// returns once the session reached its coordinator. What can be checked
// before anything starts (the configuration, the profile, the
// workspace) is checked here, so that a mistake is one line and nothing
// is spawned.
func keptSession(g *globalOptions, r sessionRequest, detach bool) error {
	if err := g.refuseRoot(); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, a, err := g.resolveDomain(cfg, r.profile, "")
	if err != nil {
		return err
	}
	rt, err := domain.RuntimeDir()
	if err != nil {
		return err
	}
	stdin, _, _ := g.files()
	st, err := keeper.Spawn(keeper.SpawnOptions{
		Dir: domain.KeeperDir(rt), Profile: p.Name, Workspace: a.Workspace,
		OnCloseEnd: cfg.Session.OnClose == config.OnCloseEnd, Detached: detach,
		Size: terminalSize(stdin), Inner: os.Args[1:],
	})
	if err != nil {
		return err
	}
	if !detach {
		return attachKept(g, cfg, keeper.Info{ID: st.ID, Profile: p.Name, Socket: st.Socket})
	}
	if st.Exited {
		if out := strings.TrimRight(st.Output, "\n "); out != "" {
			fmt.Fprintln(g.io.ErrOut, out)
		}
		if st.Code == 0 {
			return nil
		}
		return exitError{st.Code}
	}
	info := keeper.Info{ID: st.ID, Session: st.Session, Profile: p.Name}
	fmt.Fprintln(g.io.Out, info.ShortID())
	fmt.Fprintf(g.io.ErrOut, "lazaret: session %s runs detached; %s takes it back\n", info.ShortID(), attachLine(info))
	return nil
}

// terminalSize is f's size, 24×80 when it is no terminal.
func terminalSize(f *os.File) keeper.Size {
	if isTerminal(f) {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return keeper.Size{Rows: uint16(min(h, 1000)), Cols: uint16(min(w, 1000))}
		}
	}
	return keeper.Size{Rows: 24, Cols: 80}
}

// attachLine is the command that attaches to the kept session i.
func attachLine(i keeper.Info) string {
	if i.Profile == "" || i.Profile == config.DefaultProfileName {
		return "`lazaret attach " + i.ShortID() + "`"
	}
	return "`lazaret attach " + i.Profile + " " + i.ShortID() + "`"
}

// attachKept lends this terminal to the kept session i until it ends (its
// exit code is lazaret's), the user detaches or another terminal takes
// it over.
func attachKept(g *globalOptions, cfg *config.Config, i keeper.Info) error {
	keys, err := config.ParseDetachKeys(cfg.Session.DetachKeys)
	if err != nil {
		return err
	}
	conn, err := net.Dial("unix", i.Socket)
	if err != nil {
		return fmt.Errorf("attaching to session %s: %w", i.ShortID(), err)
	}
	defer conn.Close()
	closing := "detaches it"
	if cfg.Session.OnClose == config.OnCloseEnd {
		closing = "ends it"
	}
	fmt.Fprintf(g.io.ErrOut, "lazaret: %s detaches this session; closing the terminal %s\n", cfg.Session.DetachKeys, closing)
	stdin, stdout, _ := g.files()
	res, err := keeper.Attach(conn, stdin, stdout, keys)
	if err != nil {
		return err
	}
	switch {
	case res.Ended:
		if res.Code != 0 {
			return exitError{res.Code}
		}
		return nil
	case res.TakenOver:
		fmt.Fprintln(g.io.ErrOut, "\r\nlazaret: detached: attached from another terminal")
	case res.Lost:
		fmt.Fprintf(g.io.ErrOut, "\r\nlazaret: detached: the session's keeper let this terminal go (too slow?); %s takes it back\n", attachLine(i))
	default:
		fmt.Fprintf(g.io.ErrOut, "\r\nlazaret: detached; %s takes it back\n", attachLine(i))
	}
	return nil
}

// keeperLink is a kept session CLI's line to its keeper (descriptor
// keeper.EnvInner names).
type keeperLink struct{ f *os.File }

// openKeeperLink returns the keeper's line when this process is kept, and
// takes the marker out of the environment: the coordinator and the
// commands this CLI starts are not kept sessions.
func openKeeperLink() *keeperLink {
	v := os.Getenv(keeper.EnvInner)
	if v == "" {
		return nil
	}
	_ = os.Unsetenv(keeper.EnvInner)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	return &keeperLink{f: os.NewFile(uintptr(fd), "keeper")}
}

// sessionStateWait bounds one state report to the coordinator.
const sessionStateWait = 10 * time.Second

// started tells the keeper the session reached its coordinator, then
// passes each of the keeper's state lines on: to the session's link
// (prompts wait while nobody is attached) and to the coordinator
// (`lazaret ps`, the events).
func (k *keeperLink) started(s *session) {
	fmt.Fprintf(k.f, "%s %s\n", keeper.LineStarted, s.link.SessionID())
	go func() {
		sc := bufio.NewScanner(k.f)
		sc.Buffer(make([]byte, 64), 64)
		for sc.Scan() {
			st := ctl.SessionState{Kept: true}
			switch sc.Text() {
			case keeper.StateAttached:
				st.Attached = true
			case keeper.StateDetached:
			case keeper.StateAttention:
				st.Attention = true
			default:
				continue
			}
			if !st.Attention {
				setAttached(s, st.Attached)
			}
			ctx, cancel := context.WithTimeout(context.Background(), sessionStateWait)
			err := s.client.SessionState(ctx, st)
			cancel()
			if err != nil && !errors.Is(err, ctl.ErrUnknownType) {
				s.g.log.Debug("session state", "err", err)
			}
		}
	}()
}

// setAttached tells the session's link whether a terminal is attached
// (sessionlink holds a detached session's prompts as pending); through
// an interface while that method is being added beside this code.
func setAttached(s *session, attached bool) {
	if l, ok := any(s.link).(interface{ SetAttached(bool) }); ok {
		l.SetAttached(attached)
	}
}
