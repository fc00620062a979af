package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// The harness runs two helper processes from its own binary (-role): the shared
// upstream and the Go net/http reverse proxy that stands for "a proxy written in
// Go the obvious way".

// smallBody is the ~100-byte answer of the upstream's "/".
var smallBody = []byte("numaproxy benchmark upstream: a small response body of about one hundred bytes, the same for all.\n")

const largeSize = 1 << 20

// compressibleSize is the gzip shapes' response: HTML-like text that gzip shrinks to
// about a third.
const compressibleSize = 100 << 10

// compressibleBody is compressibleSize bytes of words and numbers drawn from a
// fixed seed, the same in every run.
func compressibleBody() []byte {
	words := []string{"<p>", "numaproxy", "nginx", "gzip", "</p>\n", "compression", "stream", "loop", "the", "a"}
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < compressibleSize {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(rng.IntN(1000)))
	}
	return b.Bytes()[:compressibleSize]
}

// runUpstream serves "/", "/nolog/", "/limited" and "/rl/..." (smallBody), "/1m" (1 MiB) and any path
// ending in "/100k" (compressibleBody, text/html) with fasthttp. "/nolog/" is the log
// shapes' baseline: the same response as "/", so that the two differ by the log alone.
func runUpstream(addr string) error {
	large := bytes.Repeat([]byte("0123456789abcdef"), largeSize/16)
	text := compressibleBody()
	s := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			switch string(ctx.Path()) {
			case "/", "/nolog/", "/limited":
				ctx.Response.SetBodyRaw(smallBody)
			case "/1m":
				ctx.Response.SetBodyRaw(large)
			default:
				if bytes.HasPrefix(ctx.Path(), []byte("/rl/")) {
					ctx.Response.SetBodyRaw(smallBody) // the reqlogic shape's rewritten URIs
					return
				}
				if bytes.HasSuffix(ctx.Path(), []byte("/100k")) {
					ctx.Response.Header.SetContentType("text/html")
					ctx.Response.SetBodyRaw(text)
					return
				}
				ctx.SetStatusCode(404)
			}
		},
		Name:                          "",
		NoDefaultServerHeader:         true,
		NoDefaultDate:                 true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
		Concurrency:                   100000,
		ReadBufferSize:                8 << 10,
	}
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// runGoProxy runs httputil.ReverseProxy configured like the other proxies: one
// upstream, 32 idle upstream connections kept, no X-Forwarded-* headers added.
func runGoProxy(addr, upstream string) error {
	target, err := url.Parse("http://" + upstream)
	if err != nil {
		return err
	}
	tr := &http.Transport{
		MaxIdleConns:        32,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: tr,
		ErrorLog:  nil,
	}
	s := &http.Server{
		Addr:              addr,
		Handler:           rp,
		IdleTimeout:       75 * time.Second,
		ReadHeaderTimeout: 60 * time.Second,
	}
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

func runRole(role, listen, upstream string) {
	var err error
	switch role {
	case "upstream":
		err = runUpstream(listen)
	case "goproxy":
		err = runGoProxy(listen, upstream)
	case "relay":
		err = runRelay(listen, upstream)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	fmt.Fprintf(os.Stderr, "npbench %s: %v\n", role, err)
	os.Exit(1)
}
