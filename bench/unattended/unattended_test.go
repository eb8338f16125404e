//go:build bench

// Package unattended measures issue 35's unattended sessions on the real
// path (rootless podman + runsc), each against its baseline in the same
// run, and prints a markdown table for docs/PERFORMANCE.md
// ("Unattended sessions"):
//
//   - request → notification: an agent in a detached session runs
//     `lazaret-escalate`; from the moment it starts (a timestamp the
//     agent writes just before) to the desktop notification arriving at a
//     Notifications service on a private session bus, and to the signed
//     webhook request arriving at a loopback receiver (goal: under
//     100 ms);
//   - attach: `lazaret attach` of a detached shell until its screen is
//     redrawn, against a new session on the same running sandbox (`lazaret
//     exec -t -- sh -c 'echo …'`), which is what attaching replaces;
//   - keystroke round trip (a command typed, its output seen) and 20 MB
//     printed to the terminal, through the keeper (a kept shell) against
//     the same shell without one (`exec -t -- sh`);
//   - the keeper's and the coordinator's resident memory while the
//     detached session prints without pause for UNATTENDED_CHATTY_S
//     seconds (default 60; at that rate, more output than an agent
//     prints in an hour): first, largest and last sample.
//
// It runs as the unprivileged podman user with LAZARET_BIN naming the
// built binaries (scripts/bench).
package unattended

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/lazaret-dev/lazaret/internal/adapter/desktopnotify/desktoptest"
)

const hookKey = "bench-unattended-key"

type env struct {
	b                   testing.TB
	bin, config, ws     string
	extra               []string
	desk                *desktoptest.Service
	hooks               chan time.Time
	keepDir, runtimeDir string
}

func (e *env) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, filepath.Join(e.bin, "lazaret"), append([]string{"--config", e.config}, args...)...)
	c.Dir, c.Env = e.ws, append(os.Environ(), e.extra...)
	return c
}

func (e *env) run(args ...string) string {
	e.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := e.cmd(ctx, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		e.b.Fatalf("lazaret %v: %v\n%s%s", args, err, out, stderr)
	}
	return string(out)
}

func setup(b *testing.B) *env {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		b.Fatal("LAZARET_BIN is not set")
	}
	root := b.TempDir()
	e := &env{b: b, bin: bin, config: filepath.Join(root, "config.toml"), ws: filepath.Join(root, "ws"), hooks: make(chan time.Time, 256)}
	if err := os.MkdirAll(e.ws, 0o755); err != nil {
		b.Fatal(err)
	}
	bus := desktoptest.Bus(b)
	e.desk = desktoptest.Serve(b, bus)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Lazaret-Timestamp")
		if r.Header.Get("X-Lazaret-Event") == "approval.pending" && verify(ts, body, r.Header.Get("X-Lazaret-Signature")) {
			e.hooks <- at
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	e.extra = []string{"DBUS_SESSION_BUS_ADDRESS=" + bus, "LZ_BENCH_HOOK_KEY=" + hookKey}
	cfg := fmt.Sprintf("data_root = %q\n[escalation]\nanswer_from = \"any\"\n[notify]\ndesktop = true\nwebhook = { url = %q, secret = \"env:LZ_BENCH_HOOK_KEY\" }\n",
		filepath.Join(root, "data"), srv.URL)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	e.runtimeDir = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "lazaret")
	e.keepDir = filepath.Join(e.runtimeDir, "keep")
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.cmd(ctx, "stop", "--all").Run()
		_ = exec.Command("podman", "unshare", "rm", "-rf", root).Run()
	})
	return e
}

// verify checks the webhook's signature as docs/NOTIFY.md says.
func verify(ts string, body []byte, sig string) bool {
	m := hmacSHA256([]byte(hookKey), append([]byte(ts+"."), body...))
	return hmac.Equal([]byte(sig), []byte("sha256="+m))
}

// term is a lazaret process on a PTY of its own.
type term struct {
	cmd  *exec.Cmd
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	seen chan struct{}
	done chan struct{}
}

func (e *env) pty(args ...string) *term {
	e.b.Helper()
	t := &term{cmd: e.cmd(context.Background(), args...), seen: make(chan struct{}, 1), done: make(chan struct{})}
	f, err := pty.StartWithSize(t.cmd, &pty.Winsize{Rows: 40, Cols: 150})
	if err != nil {
		e.b.Fatal(err)
	}
	t.ptmx = f
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				t.mu.Lock()
				t.out.Write(buf[:n])
				t.mu.Unlock()
				select {
				case t.seen <- struct{}{}:
				default:
				}
			}
			if err != nil {
				break
			}
		}
		_ = t.cmd.Wait()
		close(t.done)
	}()
	return t
}

// waitFor waits until the output holds s after byte offset from.
func (t *term) waitFor(b testing.TB, from int, s string) {
	deadline := time.After(2 * time.Minute)
	for {
		t.mu.Lock()
		ok := t.out.Len() > from && bytes.Contains(t.out.Bytes()[from:], []byte(s))
		t.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-t.seen:
		case <-t.done:
			t.mu.Lock()
			defer t.mu.Unlock()
			if !bytes.Contains(t.out.Bytes()[min(from, t.out.Len()):], []byte(s)) {
				b.Fatalf("the terminal ended without %q:\n%s", s, t.out.String())
			}
			return
		case <-deadline:
			b.Fatalf("no %q on the terminal:\n%s", s, t.out.String())
		}
	}
}

func (t *term) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.out.Len()
}

func (t *term) send(s string) { _, _ = t.ptmx.WriteString(s) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func BenchmarkUnattended(b *testing.B) {
	for b.Loop() {
		e := setup(b)
		notifyRows := requestToNotification(b, e)
		attachRows := attachLatency(b, e)
		keyRows := throughKeeper(b, e)
		memRows := chattyMemory(b, e)
		fmt.Printf("\n| measurement | lazaret | baseline | ratio |\n|---|---|---|---|\n")
		for _, r := range slices.Concat(notifyRows, attachRows, keyRows, memRows) {
			fmt.Println(r)
		}
	}
}

// requestToNotification: the agent writes a timestamp and asks; the
// notifications' arrival is measured from it, then the request is
// approved from here and the agent asks again.
func requestToNotification(b *testing.B, e *env) []string {
	const rounds = 10
	agent := fmt.Sprintf(`for i in $(seq %d); do date +%%s%%N > /workspace/.t$i; lazaret-escalate --reason bench -- true; done; exec sh`, rounds)
	e.run("exec", "--direct", "-t", "--detach", "--", "sh", "-c", agent)
	var desk, hook []time.Duration
	for i := 1; i <= rounds; i++ {
		var tDesk, tHook time.Time
		for tDesk.IsZero() {
			select {
			case c := <-e.desk.Calls:
				if strings.Contains(c.Summary, "approval needed") {
					tDesk = time.Now()
				}
			case <-time.After(time.Minute):
				b.Fatalf("round %d: no desktop notification", i)
			}
		}
		select {
		case tHook = <-e.hooks:
		case <-time.After(time.Minute):
			b.Fatalf("round %d: no webhook call", i)
		}
		raw, err := os.ReadFile(filepath.Join(e.ws, ".t"+strconv.Itoa(i)))
		ns, perr := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil || perr != nil {
			b.Fatalf("round %d: the agent's timestamp: %v %v", i, err, perr)
		}
		t0 := time.Unix(0, ns)
		desk, hook = append(desk, tDesk.Sub(t0)), append(hook, tHook.Sub(t0))
		var pending []struct{ ID, Hash string }
		if err := json.Unmarshal([]byte(e.run("approvals", "--json")), &pending); err != nil || len(pending) != 1 {
			b.Fatalf("round %d: pending %v %v", i, pending, err)
		}
		e.run("approvals", "answer", pending[0].ID, "approve", "--hash", pending[0].Hash)
	}
	return []string{
		fmt.Sprintf("| request → desktop notification (median of %d; goal < 100 ms) | %s | — | — |", rounds, ms(median(desk))),
		fmt.Sprintf("| request → signed webhook call (median of %d; goal < 100 ms) | %s | — | — |", rounds, ms(median(hook))),
	}
}

// keptShell starts a detached shell, prints a marker on it and returns
// its id.
func keptShell(b *testing.B, e *env) string {
	id := strings.TrimSpace(e.run("shell", "--direct", "--detach"))
	a := e.pty("attach", id)
	a.send("echo BENCH$((1))READY\r")
	a.waitFor(b, 0, "BENCH1READY")
	a.send("\x1cd")
	<-a.done
	return id
}

// attachLatency: attach until the screen is redrawn, against a new
// session on the same sandbox until its first output.
func attachLatency(b *testing.B, e *env) []string {
	const rounds = 10
	id := keptShell(b, e)
	var att, fresh []time.Duration
	for range rounds {
		t0 := time.Now()
		a := e.pty("attach", id)
		a.waitFor(b, 0, "BENCH1READY")
		att = append(att, time.Since(t0))
		a.send("\x1cd")
		<-a.done
		t0 = time.Now()
		f := e.pty("exec", "--direct", "-t", "--", "sh", "-c", "echo FRESH$((1))")
		f.waitFor(b, 0, "FRESH1")
		fresh = append(fresh, time.Since(t0))
		<-f.done
	}
	return []string{fmt.Sprintf("| attach until the screen is redrawn (median of %d) vs a new session's first output | %s | %s | %.2f |",
		rounds, ms(median(att)), ms(median(fresh)), float64(median(att))/float64(median(fresh)))}
}

// typing measures, on an interactive shell t: a command typed until its
// output is seen (rounds), and 20 MB printed until its end is seen.
func typing(b *testing.B, t *term) (key, flood time.Duration) {
	const rounds = 30
	var ks []time.Duration
	for i := range rounds {
		off := t.len()
		t0 := time.Now()
		t.send(fmt.Sprintf("echo K%d$((1))\r", i))
		t.waitFor(b, off, fmt.Sprintf("K%d1", i))
		ks = append(ks, time.Since(t0))
	}
	off := t.len()
	t0 := time.Now()
	t.send("head -c 20000000 /dev/zero | tr '\\0' x | fold -w 100; echo END$((1))\r")
	t.waitFor(b, off, "END1")
	return median(ks), time.Since(t0)
}

// throughKeeper: typing and a flood of output through a kept shell
// against the same shell without a keeper.
func throughKeeper(b *testing.B, e *env) []string {
	id := keptShell(b, e)
	a := e.pty("attach", id)
	a.waitFor(b, 0, "BENCH1READY")
	kKey, kFlood := typing(b, a)
	a.send("exit\r")
	<-a.done
	d := e.pty("exec", "--direct", "-t", "--", "sh")
	d.send("echo R$((1))\r")
	d.waitFor(b, 0, "R1")
	dKey, dFlood := typing(b, d)
	d.send("exit\r")
	<-d.done
	return []string{
		fmt.Sprintf("| a typed command until its output (median of 30): kept shell vs `exec -t -- sh` | %s | %s | %.2f |", ms(kKey), ms(dKey), float64(kKey)/float64(dKey)),
		fmt.Sprintf("| 20 MB printed to the terminal: kept shell vs `exec -t -- sh` | %s | %s | %.2f |", ms(kFlood), ms(dFlood), float64(kFlood)/float64(dFlood)),
	}
}

// chattyFor is how long the detached session prints (UNATTENDED_CHATTY_S).
func chattyFor() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("UNATTENDED_CHATTY_S")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 60 * time.Second
}

// chattyMemory: a detached session prints without pause; the keeper's
// and the coordinator's resident memory are sampled every 5 s.
func chattyMemory(b *testing.B, e *env) []string {
	id := keptShell(b, e)
	a := e.pty("attach", id)
	a.waitFor(b, 0, "BENCH1READY")
	a.send("while :; do seq 1 2000; done\r")
	time.Sleep(time.Second)
	a.send("\x1cd")
	<-a.done
	keeper := keeperPID(b, e, id)
	var st struct {
		Status struct{ PID int } `json:"status"`
	}
	if err := json.Unmarshal([]byte(e.run("status", "--json")), &st); err != nil || st.Status.PID == 0 {
		b.Fatalf("status: %v", err)
	}
	var kRSS, cRSS []int
	end := time.Now().Add(chattyFor())
	for {
		kRSS, cRSS = append(kRSS, rssKiB(b, keeper)), append(cRSS, rssKiB(b, st.Status.PID))
		if time.Now().After(end) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	a = e.pty("attach", id)
	a.send("\x03")
	time.Sleep(500 * time.Millisecond)
	a.send("exit\r")
	<-a.done
	row := func(what string, s []int) string {
		return fmt.Sprintf("| %s, detached session printing for %s: first / largest / last sample | %d / %d / %d KiB | — | — |",
			what, chattyFor(), s[0], slices.Max(s), s[len(s)-1])
	}
	return []string{row("keeper RSS", kRSS), row("coordinator RSS", cRSS)}
}

// keeperPID reads the kept session's keeper pid from its info file.
func keeperPID(b *testing.B, e *env, id string) int {
	files, _ := filepath.Glob(filepath.Join(e.keepDir, "*.json"))
	for _, f := range files {
		var info struct {
			ID, Session string
			PID         int
		}
		raw, err := os.ReadFile(f)
		if err == nil && json.Unmarshal(raw, &info) == nil && (strings.HasPrefix(info.Session, id) || strings.HasPrefix(info.ID, id)) {
			return info.PID
		}
	}
	b.Fatalf("no keeper for session %s in %s", id, e.keepDir)
	return 0
}

// rssKiB is pid's VmRSS.
func rssKiB(b *testing.B, pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("pid %d: %v", pid, err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
