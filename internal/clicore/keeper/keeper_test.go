package keeper

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/unixsock"
)

// innerEnv makes the test binary, started by a keeper, a small inner
// CLI (innerMain) instead of the tests.
const innerEnv = "KEEPER_TEST_INNER"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Verb { // Spawn's keeper
		os.Exit(Main(os.Args[2:]))
	}
	if os.Getenv(innerEnv) == "never-starts" {
		_, _ = io.Copy(io.Discard, os.Stdin) // a start waiting on a question
		os.Exit(129)
	}
	if os.Getenv(innerEnv) != "" {
		os.Exit(innerMain())
	}
	os.Exit(m.Run())
}

// innerMain stands in for the kept CLI: it reports "started", prints the
// keeper's state lines, and runs the commands it reads on its terminal.
func innerMain() int {
	state := os.NewFile(3, "state")
	fmt.Fprintln(state, LineStarted+" sess0123456789abcdef")
	detached := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(state)
		for sc.Scan() {
			fmt.Printf("state=%s\r\n", sc.Text())
			if sc.Text() == StateDetached {
				detached <- struct{}{}
			}
		}
	}()
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	go func() {
		<-terms // a cluster CLI leaving its session running
		fmt.Print("left on SIGTERM\r\n")
		os.Exit(7)
	}()
	fmt.Print("inner ready\r\n")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		var code int
		switch {
		case strings.HasPrefix(line, "exit "):
			_, _ = fmt.Sscanf(line, "exit %d", &code)
			return code
		case line == "ring-when-detached":
			for len(detached) > 0 {
				<-detached // the initial "detached" of a detached start
			}
			<-detached
			fmt.Print("\a\x1b]9;agent text\x07rang\r\n")
		default:
			fmt.Printf("got-%s\r\n", line)
		}
	}
	return 129 // the terminal hung up
}

// testKeeper is a keeper run in the test process with a real PTY and the
// test binary as its inner.
type testKeeper struct {
	k     *keeper
	sock  string
	code  chan int
	ready *bufio.Reader
}

func startKeeper(t *testing.T, o Options) *testKeeper {
	t.Helper()
	t.Setenv(innerEnv, "1")
	o.Dir, o.ID = t.TempDir(), "0123456789abcdef"
	o.Inner = []string{"inner"}
	if o.Size == (Size{}) {
		o.Size = Size{Rows: 24, Cols: 80}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	tk := &testKeeper{sock: socketPath(o.Dir, o.ID), code: make(chan int, 1), ready: bufio.NewReader(r)}
	tk.k = &keeper{o: o, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ready: w, info: Info{ID: o.ID}}
	ln, err := unixsock.Listen(tk.sock)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		code, err := tk.k.run(ln)
		ln.Close()
		if err != nil {
			code = -1
		}
		tk.code <- code
		close(ended)
	}()
	t.Cleanup(func() {
		tk.k.hangUp()
		<-ended
	})
	return tk
}

// waitDetached waits until the keeper has no terminal attached.
func (tk *testKeeper) waitDetached(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk.k.mu.Lock()
		attached := tk.k.client != nil
		tk.k.mu.Unlock()
		if !attached {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the keeper still has a terminal attached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// answer is the keeper's first line to its spawner.
func (tk *testKeeper) answer(t *testing.T) string {
	t.Helper()
	line, err := tk.ready.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// client is one attached terminal, driven by the test.
type client struct {
	conn net.Conn
	keys *os.File // what the user types
	mu   sync.Mutex
	out  strings.Builder
	res  chan Result
}

func (tk *testKeeper) attach(t *testing.T) *client {
	t.Helper()
	conn, err := net.Dial("unix", tk.sock)
	if err != nil {
		t.Fatal(err)
	}
	in, keys, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &client{conn: conn, keys: keys, res: make(chan Result, 1)}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := outR.Read(b)
			c.mu.Lock()
			c.out.Write(b[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		r, err := Attach(conn, in, outW, []byte{0x1c, 'd'})
		if err != nil {
			t.Error(err)
		}
		outW.Close()
		c.res <- r
	}()
	t.Cleanup(func() { keys.Close(); conn.Close() })
	return c
}

func (c *client) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *client) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(c.output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the terminal; it shows %q", s, c.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *client) send(t *testing.T, s string) {
	t.Helper()
	if _, err := c.keys.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitScreen waits until the keeper's copy of the screen shows s.
func (tk *testKeeper) waitScreen(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk.k.mu.Lock()
		text := tk.k.scr.text()
		tk.k.mu.Unlock()
		if strings.Contains(text, s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the screen does not show %q:\n%s", s, text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
