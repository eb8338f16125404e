//go:build bench

// Package scrub benchmarks the injector's response scrubber (internal/
// sidecar/secretproxy: every spelling of a secret's value looked for in
// every response body the agent gets from a secret's host) against a
// plain copy of the same bytes with the same reads, alternated in the same
// run, on the kinds of body an API answers: JSON text, base64, random
// bytes. Prints a markdown table for docs/PERFORMANCE.md. Run by
// `make bench`.
package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
	"github.com/lazaret-dev/lazaret/internal/sidecar/secretproxy"
)

const (
	size   = 32 << 20 // bytes per body
	rounds = 9        // alternated runs per body and path
	chunk  = 32 << 10 // the size of each read, as netd's reverse proxy reads
)

var secrets = []secret.Secret{
	{Name: "anthropic", Hosts: []string{"api.anthropic.com"}, Placeholder: "lzph-00112233445566778899aabbccddeeff",
		Value: "sk-ant-api03-" + strings.Repeat("Zq9xY_wKl0", 9) + "AA"},
	{Name: "github", Hosts: []string{"api.github.com"}, Placeholder: "lzph-ffeeddccbbaa99887766554433221100",
		Value: "ghp_4fGh7Jk9LmN0pQrStUvWxYz0123456789a"},
}

// bodies are what APIs answer: JSON (a chat completion's text and
// metadata), base64 (an image or a file), random bytes (an archive).
func bodies() map[string][]byte {
	rnd := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, size)
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	words := strings.Fields("the quick brown fox jumps over a lazy dog while an agent writes code and calls tools with arguments")
	var js bytes.Buffer
	for js.Len() < size {
		var text strings.Builder
		for range 40 {
			text.WriteString(words[rnd.IntN(len(words))] + " ")
		}
		b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": text.String()}, "id": fmt.Sprintf("msg_%016x", rnd.Uint64())})
		js.Write(b)
		js.WriteString("\n")
	}
	return map[string][]byte{"JSON text": js.Bytes()[:size], "base64": []byte(base64.StdEncoding.EncodeToString(raw))[:size], "random bytes": raw}
}

// reads hands out b in chunk-sized reads (a plain bytes.Reader would let
// io.Copy skip the copy).
type reads struct{ b []byte }

func (r *reads) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), chunk)], r.b)
	r.b = r.b[n:]
	return n, nil
}

func rate(b *testing.B, r io.Reader) float64 {
	buf := make([]byte, chunk)
	start := time.Now()
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
	if err != nil || n != size {
		b.Fatalf("copied %d: %v", n, err)
	}
	return float64(n) / (1 << 20) / time.Since(start).Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkScrub(b *testing.B) {
	fmt.Printf("\n| response scrubber (%d MiB body, %d KiB reads, 2 secrets, median of %d alternated) | plain copy | scrubbed | ratio |\n|---|---|---|---|\n", size>>20, chunk>>10, rounds)
	bs := bodies()
	for _, name := range []string{"JSON text", "base64", "random bytes"} {
		body := bs[name]
		var plain, scrubbed []float64
		for range rounds {
			plain = append(plain, rate(b, &reads{body}))
			scrubbed = append(scrubbed, rate(b, secretproxy.ScrubBody(&reads{body}, secrets)))
		}
		p, s := median(plain), median(scrubbed)
		fmt.Printf("| %s | %.0f MiB/s | %.0f MiB/s | %.2f× |\n", name, p, s, s/p)
	}
	fmt.Println()
}
