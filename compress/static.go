package compress

import (
	"bytes"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/static"
)

// Precompressed files: nginx's gzip_static (ngx_http_gzip_static_module), and in
// its style ngx_brotli's brotli_static and zstd-nginx-module's zstd_static. A
// content handler before static's: a GET or HEAD for a URI not ending in "/"
// whose file has a FILE.gz (.br, .zst) beside it is answered with that file,
// Content-Encoding set, through static's filters and sendfile
// (static.ServePrecompressed).

// StaticMode is gzip_static's value.
type StaticMode uint8

const (
	StaticOff StaticMode = iota
	StaticOn
	StaticAlways
)

var staticSuffix = [numEncodings]string{".gz", ".br", ".zst"}

// staticOrder is the order the handlers try the files: ngx_brotli's handler runs
// before gzip_static's in nginx (a module loaded later runs earlier in the phase).
var staticOrder = [numEncodings]Encoding{Brotli, Zstd, Gzip}

func init() {
	// Ranges of a response the filter encodes are refused, as nginx's gzip filter
	// clears allow_ranges before the range filter.
	static.SetEncodes(encodes)
}

// staticHandler is the content-phase handler of the *_static directives.
func staticHandler(r *httpcore.Request) httpcore.Status {
	lc, _ := r.LocConf(self).(*LocConf)
	if lc == nil {
		return httpcore.Declined
	}
	for _, e := range staticOrder {
		mode := lc.Static[e]
		if mode == StaticOff {
			continue
		}
		ok := mode == StaticAlways || staticAccepted(r, lc, e)
		if !ok && !lc.Vary {
			continue
		}
		ctx := ctxOf(r)
		ctx.staticOK, ctx.staticOn = ok, mode == StaticOn
		if st := static.ServePrecompressed(r, staticSuffix[e], codingValues[e], staticAccept); st != httpcore.Declined {
			return st
		}
	}
	return httpcore.Declined
}

// staticAccept is asked once the precompressed file is found: with "on" the
// response varies with Accept-Encoding from then on, whatever is sent.
func staticAccept(r *httpcore.Request) bool {
	ctx := ctxOf(r)
	if ctx.staticOn {
		ctx.gzipVary = true
		return ctx.staticOK
	}
	return true
}

// staticAccepted is the "on" check: nginx's ngx_http_gzip_ok for gzip (before the
// response exists), and ngx_brotli's token test for br (zstd's likewise), which
// reads no q-value and none of the gzip_* settings.
func staticAccepted(r *httpcore.Request, lc *LocConf, e Encoding) bool {
	ae, ok := r.Head().Headers.Get("Accept-Encoding")
	if !ok {
		return false
	}
	if e == Gzip {
		return gzipAccepted(ae) && allowed(r, lc, false)
	}
	return tokenAccepted(ae, encodingNames[e])
}

// tokenAccepted is ngx_brotli's ngx_http_brotli_accept_encoding: "br," first, or
// the first "br" (any case) that starts the value or follows ',' or ' ', and ends
// it or is followed by ',', ';' or ' '.
func tokenAccepted(ae []byte, token string) bool {
	if len(ae) < len(token) {
		return false
	}
	if len(ae) > len(token) && string(ae[:len(token)]) == token && ae[len(token)] == ',' {
		return true
	}
	i := indexFold(ae, token)
	if i < 0 || i > 0 && ae[i-1] != ',' && ae[i-1] != ' ' {
		return false
	}
	i += len(token)
	return i == len(ae) || bytes.IndexByte([]byte(",; "), ae[i]) >= 0
}

func setStatic(e Encoding, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		var m StaticMode
		switch s.Args[0].Value {
		case "off":
			m = StaticOff
		case "on":
			m = StaticOn
		case "always":
			m = StaticAlways
		default:
			return s.InvalidValue(s.Args[0], `it must be "on", "off" or "always"`)
		}
		lc := locConf(c)
		lc.Static[e] = m
		lc.set |= bit
		return nil
	}
}

func staticDirective(e Encoding) conf.Directive {
	name := [numEncodings]string{"gzip_static", "brotli_static", "zstd_static"}[e]
	doc := [numEncodings]string{
		"Serves FILE.gz beside the file a GET or HEAD maps to, with Content-Encoding: gzip, the original's Content-Type and the .gz file's length, Last-Modified and ETag, with sendfile; no ranges (a Range gets the whole file, as in nginx). on: for a client gzip is allowed for (Accept-Encoding, gzip_http_version, gzip_proxied, gzip_disable), and then with gzip_vary, Vary: Accept-Encoding whatever is sent; always: for every client (gunzip decompresses for those that do not accept it).",
		"Serves FILE.br beside the file as gzip_static serves FILE.gz, with Content-Encoding: br, as ngx_brotli: on checks only that Accept-Encoding names br (its q-value is not read). Tried before zstd_static and gzip_static.",
		"Serves FILE.zst beside the file as brotli_static serves FILE.br, with Content-Encoding: zstd. Tried before gzip_static.",
	}[e]
	return conf.Directive{Name: name, Contexts: hsl, Args: conf.Args1, Set: setStatic(e, staticBits[e]),
		Syntax: name + " on | off | always;", Default: "off", Doc: doc}
}
