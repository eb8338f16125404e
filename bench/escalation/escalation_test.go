//go:build bench

// Package escalation benchmarks Host Escalation end to end: the round trip
// of an auto-approved `true` from the start of lazaret-escalate to its exit,
// measured inside a runsc sandbox (the client's mTLS handshake, the
// coordinator's verification pipeline and policy, execve of /usr/bin/true
// on the host, the answer), with the client's own phase timings giving the
// TLS handshake's share. The baseline is spawning /bin/true in the same
// sandbox, i.e. what any in-sandbox process start costs; in the same rounds
// the loop also makes the request from its own running process, the round
// trip without any process start. The test binary
// itself is mounted into the sandbox and runs the timing loop there, so no
// podman exec is inside the measurement. (It starts processes the way Go
// does, with a vfork-like clone; a bash loop measured 11 ms for /bin/true
// and 41 ms for the round trip in the same conditions, its fork being dearer
// under gVisor. The binary is linked like the host's Go tests; the default
// image's glibc matches a Debian 12 host.) Prints a markdown table for
// docs/PERFORMANCE.md. Run by `make bench` (scripts/bench).
package escalation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/adapter/podman"
	"github.com/lazaret-dev/lazaret/internal/coordinator/escalation"
	"github.com/lazaret-dev/lazaret/internal/engine/domain"
	"github.com/lazaret-dev/lazaret/internal/engine/eschost"
	"github.com/lazaret-dev/lazaret/internal/engine/session"
	"github.com/lazaret-dev/lazaret/internal/engine/store"
	"github.com/lazaret-dev/lazaret/internal/insandbox/escclient"
)

const (
	innerEnv = "LAZARET_ESCBENCH_INNER"
	rounds   = 200
)

// TestMain runs the in-sandbox timing loop when started as the helper.
func TestMain(m *testing.M) {
	if os.Getenv(innerEnv) == "1" {
		os.Exit(inner())
	}
	os.Exit(m.Run())
}

// sample is one round: microseconds of the whole call and of its phases.
type sample struct {
	Total, Flags, Env, Certs, Sign, Connect, Handshake, Answer, Baseline int64
	// Start is from before the spawn until the client's main runs (fork,
	// execve, and for the Go client the Go runtime and package
	// initialisation); Exit from the client's last trace line until the
	// loop sees it has exited. Through the broker, Start ends when the C
	// front end's main runs, Handoff is from there until the broker runs
	// the client logic (connect, send, accept, read and parse), Relay from
	// the end of the client logic until the front end has the exit code.
	Start, Handoff, Relay, Exit int64
	// Broker: the front end's trace lines were there (the broker answered).
	Broker bool
	// InProcess is the same request made from the loop's own, already
	// running process (the Go front end's code called in-process): the
	// round trip without any process start in the sandbox. Only in the
	// first client's sample.
	InProcess int64
}

// comparePath is where the optional second client (ESCBENCH_COMPARE on
// the host) is mounted in the sandbox.
const comparePath = "/run/escbench-compare"

// inner runs inside the sandbox: time /bin/true, lazaret-escalate -- true
// and, when mounted, the comparison client, in turn; print each round's
// samples as one JSON line (an array: the client, then the comparison).
func inner() int {
	enc := json.NewEncoder(os.Stdout)
	// The broker is started off the sandbox's start path: wait for it.
	for i := 0; i < 300; i++ {
		if fi, err := os.Stat(escalation.SandboxBrokerSocket); err == nil && fi.Mode().Type() == os.ModeSocket {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Under a session holder the first request starts the session's
	// signer: once, before the timed rounds.
	if os.Getenv("LAZARET_SESSION_SOCKET") != "" {
		_ = exec.Command("lazaret-escalate", "--", "true").Run()
	}
	clients := []string{"lazaret-escalate"}
	if _, err := os.Stat(comparePath); err == nil {
		clients = append(clients, comparePath)
	}
	for i := 0; i < rounds; i++ {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		base := time.Since(t0).Microseconds()
		var round []sample
		for j := range clients {
			// Alternate which client goes first, so neither always
			// follows the baseline.
			c := clients[(i+j)%len(clients)]
			s, err := timeClient(c)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			s.Baseline = base
			round = append(round, s)
		}
		if len(clients) == 2 && i%2 == 1 {
			round[0], round[1] = round[1], round[0]
		}
		var err error
		if round[0].InProcess, err = timeInProcess(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = enc.Encode(round)
	}
	return 0
}

// timeInProcess makes the request of `lazaret-escalate -- true` from this
// running process, through the same session holder or broker, and returns
// the microseconds it took: what lazaret's protocol costs without the
// process start that any command in the sandbox pays.
func timeInProcess() (int64, error) {
	var errb bytes.Buffer
	t0 := time.Now()
	code := escclient.MainContext(context.Background(), []string{"lazaret-escalate", "--", "true"}, os.Getenv, io.Discard, &errb)
	d := time.Since(t0).Microseconds()
	if code != 0 {
		return 0, fmt.Errorf("in-process request: exit %d: %s", code, errb.String())
	}
	return d, nil
}

// timeClient runs client -- true once with its phase trace on.
func timeClient(client string) (sample, error) {
	var s sample
	cmd := exec.Command(client, "--", "true")
	cmd.Env = append(os.Environ(), "LAZARET_ESCALATE_TRACE=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return s, fmt.Errorf("%s: %v: %s", client, err, errb.String())
	}
	t1 := time.Now()
	s.Total = t1.Sub(t0).Microseconds()
	var begin, end, feBegin, feEnd int64
	sc := bufio.NewScanner(&errb)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "trace" {
			continue
		}
		v, _ := strconv.ParseInt(f[2], 10, 64)
		switch f[1] {
		case "flags":
			s.Flags = v
		case "env":
			s.Env = v
		case "certs":
			s.Certs = v
		case "sign":
			s.Sign = v
		case "connect":
			s.Connect = v
		case "handshake":
			s.Handshake = v
		case "answer":
			s.Answer = v
		case "begin":
			begin = v
		case "end":
			end = v
		case "fe-begin":
			feBegin = v
		case "fe-end":
			feEnd = v
		}
	}
	if feBegin != 0 {
		s.Broker = true
		s.Start, s.Handoff = feBegin-t0.UnixMicro(), begin-feBegin
		s.Relay, s.Exit = feEnd-end, t1.UnixMicro()-feEnd
	} else {
		s.Start, s.Exit = begin-t0.UnixMicro(), t1.UnixMicro()-end
	}
	return s, nil
}

func BenchmarkEscalationRoundTrip(b *testing.B) {
	bin := os.Getenv("LAZARET_BIN")
	if bin == "" {
		b.Fatal("LAZARET_BIN is not set (run through make bench)")
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("LAZARET_ESCALATE", filepath.Join(bin, "lazaret-escalate"))
	b.Setenv("LAZARET_ESCALATE_GO", filepath.Join(bin, "lazaret-escalate-go"))
	root, err := os.MkdirTemp("", "lzb-esc-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	a, err := domain.New("default", ws, filepath.Join(root, "data"), filepath.Join(root, "run"), "")
	if err != nil {
		b.Fatal(err)
	}
	if err := domain.EnsurePrivateDir(a.RuntimeDir); err != nil {
		b.Fatal(err)
	}
	// ESCBENCH_COMPARE names another lazaret-escalate build on the host
	// (say, of an earlier commit) to time in the same rounds: under a
	// varying machine load only an interleaved comparison is fair. By
	// default ("go") it is the Go client run directly, without the broker
	// (what lazaret-escalate was before the C front end, and what the
	// front end falls back to); "none" times the front end alone.
	compare := os.Getenv("ESCBENCH_COMPARE")
	switch compare {
	case "", "go":
		compare = filepath.Join(bin, "lazaret-escalate-go")
	case "none":
		compare = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// By default the audit trail is left out (a no-op auditor), so the
	// figure is the protocol's. ESCBENCH_AUDIT=store writes the three
	// records of each round trip (request and decision before the command,
	// result after it) to a real state store, as the coordinator does.
	auditor := eschost.Auditor(eschost.AuditFunc(func(context.Context, eschost.Event) error { return nil }))
	auditMode := "none (no-op auditor)"
	if os.Getenv("ESCBENCH_AUDIT") == "store" {
		st, err := store.Open(ctx, filepath.Join(root, "state.db"), store.Options{Role: "coordinator", Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		auditor, auditMode = eschost.EntryAuditor(st.AppendAudit), "state store (bbolt, fsync)"
	}
	comp := escalation.NewComponent(escalation.ComponentOptions{Anchor: a, AutoApprove: [][]string{{"true"}}, Auditor: auditor})
	name := "lazaret-bench-esc-" + a.Hash
	spec := &podman.ContainerSpec{
		Name: name, Image: "localhost/lazaret-default:latest",
		Mounts: []podman.Mount{
			{Type: "bind", Source: ws, Target: "/workspace"},
			{Type: "bind", Source: self, Target: "/run/escbench", ReadOnly: true},
		},
		CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}, Network: "none",
		Command: []string{"sleep", "infinity"},
	}
	if compare != "" {
		spec.Mounts = append(spec.Mounts, podman.Mount{Type: "bind", Source: compare, Target: comparePath, ReadOnly: true})
	}
	if err := comp.Prepare(ctx, spec); err != nil {
		b.Fatal(err)
	}
	defer comp.Close(context.Background())
	defer exec.Command("podman", "rm", "-f", "-t", "0", name).Run()
	pm := &podman.Client{Runtime: filepath.Join(bin, "lazaret-runsc")}
	inv, err := pm.RunArgs(spec)
	if err != nil {
		b.Fatal(err)
	}
	run, err := pm.Cmd(ctx, inv)
	if err != nil {
		b.Fatal(err)
	}
	if out, err := run.CombinedOutput(); err != nil {
		b.Fatalf("podman run: %v\n%s", err, out)
	}
	if err := comp.Started(ctx, name); err != nil {
		b.Fatal(err)
	}
	sess, _ := session.New()
	if _, err := comp.Registry().Register(&eschost.Session{ID: sess.ID, Public: sess.Public}); err != nil {
		b.Fatal(err)
	}
	d, _ := sess.Delegate(a.Hash, time.Hour, time.Now())
	loop, path, err := innerLoop(ctx, name, d)
	if err != nil {
		b.Fatal(err)
	}
	var loopErr bytes.Buffer
	loop.Stderr = &loopErr
	b.ResetTimer()
	out, err := loop.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("in-sandbox loop: %v\n%s", err, loopErr.String())
	}
	var samples, compared []sample
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var round []sample
		if err := dec.Decode(&round); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, round[0])
		if len(round) > 1 {
			compared = append(compared, round[1])
		}
	}
	if len(samples) != rounds {
		b.Fatalf("%d samples, want %d", len(samples), rounds)
	}
	viaBroker := 0
	for _, s := range samples {
		if s.Broker {
			viaBroker++
		}
	}
	fmt.Printf("\n%d rounds, runsc sandbox, auto-approved `true` (%s), audit trail: %s\n", rounds, time.Now().UTC().Format("2006-01-02 15:04 MST"), auditMode)
	fmt.Printf("lazaret-escalate (C front end): %d of %d rounds answered by the %s\n", viaBroker, rounds, path)
	report(samples)
	if len(compared) > 0 {
		fmt.Printf("\nComparison client %s, interleaved with the one above in the same rounds:\n", compare)
		report(compared)
	}
}

// innerLoop is the `podman exec` of the in-sandbox loop. By default it
// runs as a real session does, under the session holder
// (`lazaret-escalate __session`) with the delegation on descriptor 3, so
// every request goes to that session's signer; ESCBENCH_PATH=env puts the
// delegation in the loop's environment instead and the requests go to the
// sandbox's shared broker (the path before the session holder).
func innerLoop(ctx context.Context, name string, d *session.Delegated) (*exec.Cmd, string, error) {
	args := []string{"exec", "-e", innerEnv + "=1"}
	if os.Getenv("ESCBENCH_PATH") == "env" {
		for _, kv := range d.Env() {
			args = append(args, "-e", kv)
		}
		return exec.CommandContext(ctx, "podman", append(args, name, "/run/escbench")...), "shared broker (key in the environment)", nil
	}
	r, err := d.Channel()
	if err != nil {
		return nil, "", err
	}
	args = append(args, "-e", session.EnvSessionID+"="+d.SessionID, "--preserve-fds", "1", name, escalation.SandboxClient, session.HolderVerb, "--", "/run/escbench")
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.ExtraFiles = []*os.File{r}
	return cmd, "session holder's signer", nil
}

// report prints the markdown table of one client's samples.
func report(samples []sample) {
	col := func(f func(sample) int64) []int64 {
		v := make([]int64, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v
	}
	med := func(v []int64) float64 { return float64(v[len(v)/2]) / 1000 }
	p99 := func(v []int64) float64 { return float64(v[(len(v)*99)/100]) / 1000 }
	total, hs := col(func(s sample) int64 { return s.Total }), col(func(s sample) int64 { return s.Handshake })
	ans := col(func(s sample) int64 { return s.Answer })
	env, certs := col(func(s sample) int64 { return s.Env }), col(func(s sample) int64 { return s.Certs })
	sign, conn := col(func(s sample) int64 { return s.Sign }), col(func(s sample) int64 { return s.Connect })
	start, exit := col(func(s sample) int64 { return s.Start }), col(func(s sample) int64 { return s.Exit })
	flags := col(func(s sample) int64 { return s.Flags })
	handoff, relay := col(func(s sample) int64 { return s.Handoff }), col(func(s sample) int64 { return s.Relay })
	rest := col(func(s sample) int64 {
		return s.Total - s.Start - s.Handoff - s.Flags - s.Env - s.Certs - s.Sign - s.Connect - s.Handshake - s.Answer - s.Relay - s.Exit
	})
	base := col(func(s sample) int64 { return s.Baseline })
	fmt.Println("\n| measure | median ms | p99 ms |")
	fmt.Println("|---|---|---|")
	fmt.Printf("| baseline: spawn /bin/true in the sandbox | %.2f | %.2f |\n", med(base), p99(base))
	fmt.Printf("| lazaret-escalate -- true, start to exit | %.2f | %.2f |\n", med(total), p99(total))
	fmt.Printf("| · spawn until the client's main runs (execve; Go: runtime init) | %.2f | %.2f |\n", med(start), p99(start))
	fmt.Printf("| · front end → broker: connect, send, broker reads and parses | %.2f | %.2f |\n", med(handoff), p99(handoff))
	fmt.Printf("| · parse the command line | %.2f | %.2f |\n", med(flags), p99(flags))
	fmt.Printf("| · read session env, decode delegation | %.2f | %.2f |\n", med(env), p99(env))
	fmt.Printf("| · read and parse certificates and key | %.2f | %.2f |\n", med(certs), p99(certs))
	fmt.Printf("| · connect to the escalation socket | %.2f | %.2f |\n", med(conn), p99(conn))
	fmt.Printf("| · TLS 1.3 mutual handshake | %.2f | %.2f |\n", med(hs), p99(hs))
	fmt.Printf("| · build and sign the request | %.2f | %.2f |\n", med(sign), p99(sign))
	fmt.Printf("| · request → verify → execve on host → answer | %.2f | %.2f |\n", med(ans), p99(ans))
	fmt.Printf("| · broker → front end: exit frame (and trace) relayed | %.2f | %.2f |\n", med(relay), p99(relay))
	fmt.Printf("| · exit, until the loop sees it (includes writing the trace) | %.2f | %.2f |\n", med(exit), p99(exit))
	fmt.Printf("| · the rest (between phases) | %.2f | %.2f |\n", med(rest), p99(rest))
	if inproc := col(func(s sample) int64 { return s.InProcess }); inproc[len(inproc)-1] > 0 {
		fmt.Printf("| same rounds: the request from the loop's running process, no process start | %.2f | %.2f |\n", med(inproc), p99(inproc))
	}
	fmt.Printf("\nTLS handshake share of the median round trip: %.0f %%\n", 100*med(hs)/med(total))
}
