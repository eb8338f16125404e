package secretproxy

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// scrubValues are the values the scrubber tests use: plain, with the
// characters encoders change, and short.
var scrubValues = []string{
	"ALPHA-REAL-VALUE",
	"sk-ant-api03-Zq9/x+Y_w~k&l<m>\"n'o\\p pq",
	"ghp_4fGh7Jk9LmN0pQrStUvWxYz012345678",
	"abcdefgh",
}

// spelling is one way an upstream may hand a value back.
type spelling struct {
	name string
	enc  func(v string) string
	// whole: enc(v) is only the value's spelling (no bytes around it in
	// the encoding), so all of it but padding must be scrubbed.
	whole bool
	// lossy: the value cannot be read back from enc(v) (lower-cased
	// base64); the check is then that no 8 characters of enc(v) remain.
	lossy bool
}

// asciiLower and asciiUpper change ASCII letters only (strings.ToLower
// would turn a byte that is not UTF-8 into U+FFFD).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func b64Around(enc *base64.Encoding, pre, post string) func(string) string {
	return func(v string) string { return enc.EncodeToString([]byte(pre + v + post)) }
}

func spellings() []spelling {
	sp := []spelling{
		{"raw", func(v string) string { return v }, true, false},
		{"lower", asciiLower, true, false},
		{"upper", asciiUpper, true, false},
		{"query-escaped", url.QueryEscape, true, false},
		{"path-escaped", url.PathEscape, true, false},
		{"percent-every-byte-lower", func(v string) string {
			var b strings.Builder
			for i := 0; i < len(v); i++ {
				fmt.Fprintf(&b, "%%%02x", v[i])
			}
			return b.String()
		}, true, false},
		{"json", func(v string) string { b, _ := json.Marshal(v); return string(b[1 : len(b)-1]) }, true, false},
		{"json-u-every-byte", func(v string) string {
			var b strings.Builder
			for i := 0; i < len(v); i++ {
				fmt.Fprintf(&b, `\u%04X`, v[i])
			}
			return b.String()
		}, true, false},
		{"html", html.EscapeString, true, false},
		{"hex", func(v string) string { return hex.EncodeToString([]byte(v)) }, true, false},
		{"HEX", func(v string) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) }, true, false},
		{"hex-of-lower", func(v string) string { return hex.EncodeToString([]byte(asciiLower(v))) }, true, false},
		{"base64-lowercased", func(v string) string { return strings.ToLower(base64.RawStdEncoding.EncodeToString([]byte(v))) }, true, true},
		{"base64-of-upper", func(v string) string { return base64.RawStdEncoding.EncodeToString([]byte(asciiUpper(v))) }, true, false},
		{"basic-credentials", b64Around(base64.StdEncoding, "x-access-token:", ""), false, false},
		{"base64-query-escaped", func(v string) string { return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(">>?" + v))) }, false, false},
		{"base64-json-slash-escaped", func(v string) string {
			return strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte("??"+v+"?")), "/", `\/`)
		}, false, false},
	}
	for _, e := range []struct {
		name string
		enc  *base64.Encoding
	}{{"std", base64.StdEncoding}, {"raw-std", base64.RawStdEncoding}, {"url", base64.URLEncoding}, {"raw-url", base64.RawURLEncoding}} {
		sp = append(sp, spelling{"base64-" + e.name, b64Around(e.enc, "", ""), true, false})
		for pre := range 3 {
			for post := range 3 {
				sp = append(sp, spelling{fmt.Sprintf("base64-%s-in-%d+%d", e.name, pre, post),
					b64Around(e.enc, strings.Repeat("\xfb", pre), strings.Repeat("\xff", post)), false, false})
			}
		}
	}
	return sp
}

// leaks: some reading of out (as it is, percent-, HTML-, JSON-decoded,
// hex or base64 at any offset, in any case) holds 4 bytes of v in a row.
func leaks(out, v string) string {
	return leaksOf(out, v, "")
}

// leaksOf also finds 8 characters in a row of lossy, in any case.
func leaksOf(out, v, lossy string) string {
	for i := 0; i+8 <= len(lossy); i++ {
		if strings.Contains(strings.ToLower(out), strings.ToLower(lossy[i:i+8])) {
			return "lossy spelling"
		}
	}
	var windows []string
	lv := strings.ToLower(v)
	for i := 0; i+4 <= len(lv); i++ {
		if w := lv[i : i+4]; !inPlaceholder(w) {
			windows = append(windows, w)
		}
	}
	for name, text := range readings(out) {
		lt := strings.ToLower(text)
		for _, w := range windows {
			if strings.Contains(lt, w) {
				return name
			}
		}
	}
	return ""
}

// inPlaceholder: w is part of a test secret's placeholder (which the
// agent may see in any spelling).
func inPlaceholder(w string) bool {
	for _, s := range testSecrets {
		if strings.Contains(s.Placeholder, w) {
			return true
		}
	}
	return false
}

func readings(out string) map[string]string {
	r := map[string]string{"as is": out, "html": html.UnescapeString(out)}
	pct := out
	for i := 0; i < 2; i++ {
		if u, err := url.QueryUnescape(strings.ReplaceAll(pct, `\/`, "/")); err == nil {
			pct = u
		}
		r["percent"+strconv.Itoa(i)] = pct
	}
	var js strings.Builder
	for i := 0; i < len(out); i++ {
		if (out[i] == '\\') && i+5 < len(out) && (out[i+1] == 'u' || out[i+1] == 'x') {
			n := 4
			if out[i+1] == 'x' {
				n = 2
			}
			if c, err := strconv.ParseUint(out[i+2:i+2+n], 16, 8); err == nil {
				js.WriteByte(byte(c))
				i += 1 + n
				continue
			}
		}
		if out[i] == '\\' && i+1 < len(out) {
			i++
		}
		js.WriteByte(out[i])
	}
	r["json"] = js.String()
	hexRun := strings.Map(func(c rune) rune {
		if strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return c
		}
		return -1
	}, out)
	for off := range 2 {
		s := hexRun[min(off, len(hexRun)):]
		b, _ := hex.DecodeString(s[:len(s)&^1])
		r["hex"+strconv.Itoa(off)] = string(b)
	}
	for _, text := range []string{out, pct} {
		for _, alpha := range []string{b64Std, b64URL} {
			run := strings.Map(func(c rune) rune {
				if strings.ContainsRune(alpha, c) {
					return c
				}
				return -1
			}, strings.ReplaceAll(text, `\/`, "/"))
			for _, lower := range []bool{false, true} {
				if lower {
					run = strings.ToLower(run)
				}
				for off := range 4 {
					s := run[min(off, len(run)):]
					enc := base64.RawStdEncoding
					if alpha == b64URL {
						enc = base64.RawURLEncoding
					}
					if len(s)%4 == 1 {
						s = s[:len(s)-1]
					}
					b, _ := enc.DecodeString(s)
					r[fmt.Sprintf("base64 %d %v %v", off, alpha == b64URL, lower)] += string(b) + "|"
				}
			}
		}
	}
	return r
}

// scrubStream runs in through a scrubber, read by readers that split it
// as split says.
func scrubStream(t *testing.T, ps *patternSet, in io.Reader) string {
	t.Helper()
	out, err := io.ReadAll(newScrubReader(in, ps, nil))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func valuePatterns(values ...string) *patternSet {
	phs := make([]string, len(values))
	for i := range values {
		phs[i] = "lzph-" + strconv.Itoa(i) + "0123456789abcdef0123456789abcde"
	}
	return newPatternSet(values, phs, valueForms)
}

// TestScrubSpellings: every spelling of every value, in one read, split
// into two reads at every point and read a byte at a time, never leaves
// four bytes of the value in any reading; a whole spelling leaves
// nothing but padding when it arrives in one piece. Control: the same
// readings find the value in the unscrubbed text.
func TestScrubSpellings(t *testing.T) {
	for _, v := range scrubValues {
		ps := valuePatterns(v)
		for _, sp := range spellings() {
			enc := sp.enc(v)
			in := `{"echo": "` + enc + `"}`
			leaks := func(out, v string) string {
				if sp.lossy {
					return leaksOf(out, v, enc)
				}
				return leaksOf(out, v, "")
			}
			if leaks(in, v) == "" {
				t.Fatalf("control: %s of %q not found in %q", sp.name, v, in)
			}
			out := scrubStream(t, ps, strings.NewReader(in))
			if len(out) != len(in) {
				t.Fatalf("%s: length changed: %q", sp.name, out)
			}
			if where := leaks(out, v); where != "" {
				t.Errorf("%s of %q: scrubbed %q still holds the value (%s)", sp.name, v, out, where)
			}
			if got := out[10 : 10+len(enc)]; sp.whole && strings.Trim(got, "*=") != "" {
				t.Errorf("%s of %q: not all scrubbed: %q", sp.name, v, got)
			}
			for cut := 1; cut < len(in); cut++ {
				r := io.MultiReader(strings.NewReader(in[:cut]), strings.NewReader(in[cut:]))
				if where := leaks(scrubStream(t, ps, r), v); where != "" {
					t.Fatalf("%s of %q cut at %d: leaks (%s)", sp.name, v, cut, where)
				}
			}
			if where := leaks(scrubStream(t, ps, iotest.OneByteReader(strings.NewReader(in))), v); where != "" {
				t.Errorf("%s of %q a byte at a time: leaks (%s)", sp.name, v, where)
			}
		}
	}
}

// TestScrubLeavesOtherBytes: text, JSON and base64 of random bytes that
// hold no value pass unchanged, in any split; a value among them is
// scrubbed and nothing else.
func TestScrubLeavesOtherBytes(t *testing.T) {
	ps := valuePatterns(scrubValues...)
	rnd := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, 1<<16)
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	js, _ := json.Marshal(map[string]any{"b": b64, "text": strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)})
	for name, in := range map[string]string{"binary": string(raw), "base64": b64, "json": string(js)} {
		r := iotest.HalfReader(strings.NewReader(in))
		if out := scrubStream(t, ps, r); out != in {
			t.Errorf("%s changed", name)
		}
		with := in[:1000] + scrubValues[0] + in[1000:]
		out := scrubStream(t, ps, strings.NewReader(with))
		if want := in[:1000] + strings.Repeat("*", len(scrubValues[0])) + in[1000:]; out != want {
			t.Errorf("%s: not exactly the value scrubbed", name)
		}
	}
}

// TestScrubNotHeldBack: a chunk is handed on at once when its end cannot
// begin a value's spelling (an event stream's blank line), and when only
// its last few bytes could (a short beginning is let through); a longer
// beginning waits for the next bytes, and is scrubbed when they complete
// it.
func TestScrubNotHeldBack(t *testing.T) {
	v := scrubValues[0]
	ps := valuePatterns(v)
	pr, pw := io.Pipe()
	r := newScrubReader(pr, ps, nil)
	buf := make([]byte, 1024)
	for _, chunk := range []string{"data: one\n\n", "data: AL", "PHA-REAL-VALUE\n\n"} {
		go pw.Write([]byte(chunk))
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		want := chunk
		if chunk == "PHA-REAL-VALUE\n\n" {
			want = "**************\n\n"
		}
		if string(buf[:n]) != want {
			t.Fatalf("read %q, want %q", buf[:n], want)
		}
	}
	go func() {
		pw.Write([]byte("data: ALPHA-RE"))
		pw.Write([]byte("AL-VALUE\n"))
		pw.Close()
	}()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "data: "+strings.Repeat("*", len(v))+"\n" {
		t.Errorf("held beginning: %q", out)
	}
}

// TestScrubHeaders: values in header values and names, in any spelling,
// become the placeholder; other headers are untouched.
func TestScrubHeaders(t *testing.T) {
	v := scrubValues[1]
	h := http.Header{
		"X-Echo":                             {"Bearer " + v},
		"X-Lower":                            {strings.ToLower(v)},
		"X-B64":                              {base64.StdEncoding.EncodeToString([]byte("u:" + v))},
		"X-Url":                              {"https://x/?k=" + url.QueryEscape(v)},
		"X-Other":                            {"plain"},
		"X-" + hex.EncodeToString([]byte(v)): {"name"},
	}
	ScrubResponse(h, []secret.Secret{{Name: "x", Value: v, Placeholder: "lzph-ph"}})
	for k, vs := range h {
		if leaks(k+": "+strings.Join(vs, ","), v) != "" {
			t.Errorf("%s: %q", k, vs)
		}
	}
	if h.Get("X-Echo") != "Bearer lzph-ph" || h.Get("X-Other") != "plain" || h.Get("X-Lzph-Ph") != "name" {
		t.Errorf("scrubbed headers %v", h)
	}
}

func TestScrubTruncatedAtEnd(t *testing.T) {
	v := scrubValues[2]
	ps := valuePatterns(v)
	for _, cut := range []int{4, 10, len(v) - 1} {
		in := "x " + v[:cut]
		if out := scrubStream(t, ps, strings.NewReader(in)); out != "x "+strings.Repeat("*", cut) {
			t.Errorf("the value's first %d bytes at the end: %q", cut, out)
		}
	}
	if out := scrubStream(t, ps, strings.NewReader("x gh")); out != "x gh" {
		t.Errorf("a short beginning at the end: %q", out)
	}
}
