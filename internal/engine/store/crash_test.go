package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/audit"
)

// writerEnv names the database a re-executed test binary writes to until
// it is killed.
const writerEnv = "LAZARET_STORE_TEST_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(writer(path))
	}
	os.Exit(m.Run())
}

// writer appends audit entries, sessions and escalations as fast as it can,
// with fsync, from several goroutines (so commits carry batches), until
// it is killed. Some entries are large so pages split and the file grows.
func writer(path string) int {
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Role: "writer", Timeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	errc := make(chan error)
	for g := 0; g < 3; g++ {
		go func() {
			for i := 0; ; i++ {
				e := entryOf(audit.Kinds[(i+g)%len(audit.Kinds)], "claude", i)
				if i%7 == 0 {
					e.Kind, e.Request, e.Decision, e.Result, e.Rejection = audit.KindPolicyChange, nil, nil, nil, nil
					e.Fields = map[string]string{"blob": strings.Repeat("x", rand.IntN(6000))}
				}
				if _, err := s.AppendAudit(ctx, e); err != nil {
					errc <- err
					return
				}
				if i%5 == 0 {
					id := fmt.Sprintf("s-%d-%d", g, i)
					if err := s.RecordSession(ctx, Session{ID: id, Profile: "claude", Start: time.Now(), End: time.Now()}); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	fmt.Fprintln(os.Stderr, <-errc)
	return 1
}

// TestSIGKILLLoop kills a writer process at random points 200 times; after
// each kill the store must open without being taken for corrupt and its
// chain must verify.
func TestSIGKILLLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	const kills = 200
	var last uint64
	grew := 0
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Every third kill lands anywhere, open and migration included;
		// the others land while the writer is committing.
		if i%3 != 0 {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			if line != "ready\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("kill %d: writer did not start: %q %s", i, line, stderr.String())
			}
		}
		time.Sleep(time.Duration(rand.IntN(40_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: writer ended on its own: %v %s", i, err, stderr.String())
		}

		// Half the reopens run the full consistency check the coordinator
		// runs: a killed writer must not look damaged to it either.
		s, err := Open(context.Background(), path, Options{Timeout: 5 * time.Second, Check: i%2 == 0})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", i, err)
		}
		if s.Recovered() != nil {
			t.Fatalf("kill %d: store taken for corrupt: %v", i, s.Recovered())
		}
		r, err := s.Verify(context.Background())
		s.Close()
		if err != nil || !r.OK() {
			t.Fatalf("kill %d: verify: %+v %v", i, r.Problem, err)
		}
		if r.Head.Seq < last {
			t.Fatalf("kill %d: chain shrank from %d to %d", i, last, r.Head.Seq)
		}
		if r.Head.Seq > last {
			grew++
		}
		last = r.Head.Seq
	}
	if left, _ := filepath.Glob(ownerPath(path) + "-*"); len(left) > 0 {
		t.Fatalf("temporary owner records left: %v", left)
	}
	// The kills must have interrupted a writer that was writing.
	if grew < kills/4 {
		t.Fatalf("the chain grew in only %d of %d runs", grew, kills)
	}
	t.Logf("%d kills, %d entries, chain grew in %d runs", kills, last, grew)
}

// spinEnv names a damaged file that a re-executed test binary opens.
const spinEnv = "LAZARET_STORE_TEST_SPIN"

// TestDamagedFileNeverHangs opens testdata/spin.db, a damaged v1 file
// (found by mutating v1.db) in which bbolt loops forever, in a child
// process (the stuck goroutine cannot be stopped, so it must not stay in
// this one): Open must return ErrOpenStalled within its budget.
func TestDamagedFileNeverHangs(t *testing.T) {
	if path := os.Getenv(spinEnv); path != "" {
		_, err := Open(context.Background(), path, Options{Timeout: time.Second, OpenBudget: 2 * time.Second})
		fmt.Println("open:", err)
		os.Exit(0)
	}
	orig, err := os.ReadFile("testdata/spin.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDamagedFileNeverHangs$")
	cmd.Env = append(os.Environ(), spinEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	switch {
	case strings.Contains(string(out), "open: state store "+path+": "+ErrOpenStalled.Error()):
		if after, _ := os.ReadFile(path); string(after) != string(orig) {
			t.Fatal("the damaged file was changed")
		}
	case strings.Contains(string(out), "open: <nil>"):
		// A bbolt that no longer spins here: the file must then have
		// been moved aside intact.
		moved, _ := filepath.Glob(path + ".corrupt-*")
		if len(moved) != 1 {
			t.Fatalf("opened, but the damaged file was not moved aside: %v", moved)
		}
		if kept, _ := os.ReadFile(moved[0]); string(kept) != string(orig) {
			t.Fatal("the damaged file was changed")
		}
	default:
		t.Fatalf("child output:\n%s", out)
	}
}
