package secretproxy

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/lazaret-dev/lazaret/internal/engine/secret"
)

// patterns are what the injector looks for, built once per set of
// secrets: the values' spellings (response scrubbing) and the
// placeholders' (request bodies, reporting only).
type patterns struct {
	values, placeholders *patternSet
}

func newPatterns(secrets []secret.Secret) *patterns {
	vals := make([]string, len(secrets))
	phs := make([]string, len(secrets))
	for i, s := range secrets {
		vals[i], phs[i] = s.Value, s.Placeholder
	}
	return &patterns{
		values:       newPatternSet(vals, phs, valueForms),
		placeholders: newPatternSet(phs, phs, placeholderForms),
	}
}

// scrubHeader replaces every spelling of a value in h's names and values
// by the secret's placeholder.
func (ps *patternSet) scrubHeader(h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = ps.scrubString(v)
		}
		if nk := http.CanonicalHeaderKey(ps.scrubString(k)); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// ScrubResponse replaces every spelling of a secret's value (docs/
// SECRETS.md, "What is scrubbed") by its placeholder in response headers
// or trailers.
func ScrubResponse(h http.Header, secrets []secret.Secret) {
	newPatterns(secrets).values.scrubHeader(h)
}

// scrubResponse scrubs the response's headers now and its body and
// trailers as they stream. A body in a content coding netd cannot read
// is refused (the request asked for gzip only, which the transport or
// netd decodes, so that the agent gets it uncompressed and scrubbed).
func (ps *patternSet) scrubResponse(resp *http.Response) error {
	ps.scrubHeader(resp.Header)
	ps.scrubHeader(resp.Trailer) // the names announced
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if !ok {
			return fmt.Errorf("switching protocols without a writable body")
		}
		resp.Body = &scrubConn{scrubReader: newScrubReader(rwc, ps, nil), rwc: rwc}
		return nil
	}
	body, err := decoded(resp)
	if err != nil {
		return err
	}
	sb := &scrubBody{orig: resp.Body}
	sb.trailers = func() { ps.scrubHeader(resp.Trailer) }
	sb.scrubReader = newScrubReader(body, ps, sb.trailers)
	resp.Body = sb
	return nil
}

// decoded returns the response body without its content coding: gzip and
// deflate are decoded here (the transport decodes the gzip it asked for
// itself), anything else refused.
func decoded(resp *http.Response) (io.Reader, error) {
	ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	var open func(io.Reader) (io.Reader, error)
	switch ce {
	case "", "identity":
		return resp.Body, nil
	case "gzip", "x-gzip":
		open = func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
	case "deflate":
		open = openDeflate
	default:
		return nil, fmt.Errorf("response in content coding %q, which lazaret-netd cannot scrub of the secrets' values", ce)
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return &lazyDecoder{src: resp.Body, open: open}, nil
}

// openDeflate: HTTP's deflate is zlib, but some servers send raw deflate.
func openDeflate(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	if h, err := br.Peek(2); err == nil && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 && h[0]&0x0f == 8 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// lazyDecoder opens its decoder at the first read (the decoder reads the
// stream's header, which must not block ModifyResponse).
type lazyDecoder struct {
	src  io.Reader
	open func(io.Reader) (io.Reader, error)
	r    io.Reader
}

func (d *lazyDecoder) Read(p []byte) (int, error) {
	if d.r == nil {
		r, err := d.open(d.src)
		if err != nil {
			return 0, err
		}
		d.r = r
	}
	return d.r.Read(p)
}

// scrubBody is a response body scrubbed as it is read; its trailers are
// scrubbed when it ends and when it is closed (which fills them in).
type scrubBody struct {
	*scrubReader
	orig     io.Closer
	trailers func()
}

func (b *scrubBody) Close() error {
	err := b.orig.Close()
	b.trailers()
	return err
}

// scrubConn is a switched protocol's (WebSocket's) connection, scrubbed
// in the direction towards the agent.
type scrubConn struct {
	*scrubReader
	rwc io.ReadWriteCloser
}

func (c *scrubConn) Write(p []byte) (int, error) { return c.rwc.Write(p) }
func (c *scrubConn) Close() error                { return c.rwc.Close() }

// watchReader passes a request body through unchanged while it looks for
// the placeholders in it; eof runs when the body ends (its trailers are
// in then).
type watchReader struct {
	src io.ReadCloser
	s   scrubber
	eof func()
}

func (w *watchReader) Read(p []byte) (int, error) {
	n, err := w.src.Read(p)
	if n > 0 || err == io.EOF {
		w.s.buf = append(w.s.buf, p[:n]...)
		w.s.process(err == io.EOF)
		w.s.emitted = len(w.s.buf)
		w.s.compact()
	}
	if err == io.EOF && w.eof != nil {
		w.eof()
		w.eof = nil
	}
	return n, err
}

func (w *watchReader) Close() error { return w.src.Close() }

// ScrubBody returns r as the agent would read it through the injector:
// every spelling of the secrets' values replaced by '*' (bench/scrub).
func ScrubBody(r io.Reader, secrets []secret.Secret) io.Reader {
	return newScrubReader(r, newPatterns(secrets).values, nil)
}
