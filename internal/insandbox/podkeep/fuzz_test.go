package podkeep

import (
	"io"
	"net"
	"testing"
	"time"

	wire "github.com/lazaret-dev/lazaret/internal/wire/podkeep"
	"github.com/lazaret-dev/lazaret/internal/wire/termframe"
)

// FuzzClientFrames: whatever a client sends (the agent can reach the
// socket), the keeper neither panics nor allocates beyond a frame's
// bound, and it lets the connection go. No command runs (it could not
// start), so the fuzzer's keys reach nothing.
func FuzzClientFrames(f *testing.F) {
	hello := termframe.Append(nil, wire.FrameHello, wire.EncodeCount(0))
	f.Add(termframe.Append(hello, wire.FrameResize, wire.EncodeSize(wire.Size{Rows: 24, Cols: 80})))
	f.Add(termframe.Append(termframe.Append(nil, wire.FrameHello, wire.EncodeCount(1<<63)), wire.FrameExitSeen, nil))
	f.Add(append(hello, wire.FrameInput, 0xff, 0xff, 0xff, 0xff))
	f.Add([]byte{wire.FrameHello, 0, 0, 0, 8, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		k := &Keeper{RingSize: 256, Linger: time.Hour}
		k.Start()
		defer k.finish.Do(func() { close(k.done) })
		mine, theirs := net.Pipe()
		linked := make(chan struct{})
		go func() { k.link(theirs); close(linked) }()
		go func() { _, _ = io.Copy(io.Discard, mine) }()
		_ = mine.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = mine.Write(data)
		mine.Close()
		select {
		case <-linked:
		case <-time.After(5 * time.Second):
			t.Fatal("the keeper kept a closed connection")
		}
	})
}
