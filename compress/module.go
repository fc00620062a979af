package compress

import (
	"fmt"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/pcre"
)

// Module declares nginx's gzip and gunzip directives with the core's
// gzip_* ones (gzip_vary, gzip_http_version, gzip_proxied, gzip_disable), ngx_brotli's
// brotli_* and zstd-nginx-module's zstd_*.
var Module = &conf.Module{
	Name:       "compress",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP: func(parent, child any) error {
		lc := child.(*LocConf)
		conf.Inherit(lc, parent.(*LocConf), func(lc *LocConf) *uint64 { return &lc.set }, defaults, inheritedFields)
		lc.idle = !lc.Gunzip && !lc.Coders[Gzip].On && !lc.Coders[Brotli].On && !lc.Coders[Zstd].On
		return nil
	},
	Ctx: hooks,
}

// key is the module's slot for its request contexts and loop state.
var key = httpcore.NewKey()

var hooks = &httpcore.Hooks{
	Variables: []httpcore.Variable{{Name: "gzip_ratio", Get: gzipRatio}},
	Init:      initModule,
	NewLoop:   newLoop,
	Key:       key,
}

// self is Module, for the filters (Module's own initialiser cannot name it).
var self *conf.Module

func init() { self = Module }

// Encoding is a content coding this module produces.
type Encoding uint8

const (
	Gzip Encoding = iota
	Brotli
	Zstd
	numEncodings
)

var encodingNames = [numEncodings]string{"gzip", "br", "zstd"}

func (e Encoding) String() string { return encodingNames[e] }

// Coder is one encoding's settings at a level: gzip's, brotli's or zstd's.
type Coder struct {
	On        bool
	Level     int
	MinLength int64
	Types     Types
}

// Proxied is gzip_proxied's set of flags.
type Proxied uint16

const (
	ProxiedOff Proxied = 1 << iota
	ProxiedExpired
	ProxiedNoCache
	ProxiedNoStore
	ProxiedPrivate
	ProxiedNoLastModified
	ProxiedNoETag
	ProxiedAuth
	ProxiedAny
)

var proxiedNames = map[string]Proxied{
	"off": ProxiedOff, "expired": ProxiedExpired, "no-cache": ProxiedNoCache, "no-store": ProxiedNoStore,
	"private": ProxiedPrivate, "no_last_modified": ProxiedNoLastModified, "no_etag": ProxiedNoETag,
	"auth": ProxiedAuth, "any": ProxiedAny,
}

// LocConf is the module's config at one level.
type LocConf struct {
	Coders [numEncodings]Coder
	// The core's gzip settings, which decide for every encoding (nginx's
	// ngx_http_gzip_ok; ngx_brotli's Vary too).
	Vary         bool
	HTTPMinor    int // gzip_http_version: the least HTTP/1.x minor version compressed for
	Proxied      Proxied
	Disable      []*pcre.Regexp
	DisableMSIE6 bool
	// gzip_buffers: the compressed bytes held before they go to the connection are
	// BufNum*BufSize at most.
	BufNum, BufSize int
	Gunzip          bool
	// Static is gzip_static, brotli_static and zstd_static.
	Static [numEncodings]StaticMode
	set    uint64
	// idle: the level neither compresses nor gunzips (set once merged), so the
	// header filter has nothing to decide, as nginx's gzip filter returns at once
	// under gzip off. The http level's is never merged and stays false (decided
	// per response, as before).
	idle bool
}

const (
	bitGzip uint64 = 1 << iota
	bitGzipLevel
	bitGzipMinLength
	bitGzipTypes
	bitBrotli
	bitBrotliLevel
	bitBrotliMinLength
	bitBrotliTypes
	bitZstd
	bitZstdLevel
	bitZstdMinLength
	bitZstdTypes
	bitVary
	bitHTTPVersion
	bitProxied
	bitDisable
	bitBuffers
	bitGunzip
	bitGzipStatic
	bitBrotliStatic
	bitZstdStatic
)

var staticBits = [numEncodings]uint64{bitGzipStatic, bitBrotliStatic, bitZstdStatic}

// coderBits are each encoding's bits: on, level, min length, types.
var coderBits = [numEncodings][4]uint64{
	{bitGzip, bitGzipLevel, bitGzipMinLength, bitGzipTypes},
	{bitBrotli, bitBrotliLevel, bitBrotliMinLength, bitBrotliTypes},
	{bitZstd, bitZstdLevel, bitZstdMinLength, bitZstdTypes},
}

func defaults() LocConf {
	lc := LocConf{HTTPMinor: 1, Proxied: ProxiedOff, BufNum: 32, BufSize: 4096}
	for e := range lc.Coders {
		lc.Coders[e] = Coder{Level: defaultLevel[e], MinLength: 20, Types: htmlOnly}
	}
	return lc
}

// defaultLevel: nginx's gzip_comp_level 1, ngx_brotli's 6, zstd-nginx-module's 1.
var defaultLevel = [numEncodings]int{1, 6, 1}

// levelNote says how a level maps to the library's settings.
var levelNote = [numEncodings]string{
	" An encoder (one per response being compressed, pooled per loop) takes 0.7 MB at level 1, 1.4 MB at 9.",
	" The window is 512 KB (ngx_brotli's brotli_window default); an encoder takes 2.8 MB at level 4, 4.4 MB at 6, 7.7 MB at 11.",
	" Levels map to klauspost/compress's four speeds (1-2 fastest, 3-5 default, 6-9 better, 10-22 best); the window is at most 1 MB; an encoder takes 1.5 MB at level 1, 2.6 MB at 3, 5.5 MB at 6-9, 36 MB from 10."}

// levelRange is each encoding's levels.
var levelRange = [numEncodings][2]int{{1, 9}, {0, 11}, {1, 22}}

var inheritedFields = func() []conf.Inherited[LocConf] {
	f := []conf.Inherited[LocConf]{
		{Bit: bitVary, Take: func(c, p *LocConf) { c.Vary = p.Vary }},
		{Bit: bitHTTPVersion, Take: func(c, p *LocConf) { c.HTTPMinor = p.HTTPMinor }},
		{Bit: bitProxied, Take: func(c, p *LocConf) { c.Proxied = p.Proxied }},
		{Bit: bitDisable, Take: func(c, p *LocConf) { c.Disable, c.DisableMSIE6 = p.Disable, p.DisableMSIE6 }},
		{Bit: bitBuffers, Take: func(c, p *LocConf) { c.BufNum, c.BufSize = p.BufNum, p.BufSize }},
		{Bit: bitGunzip, Take: func(c, p *LocConf) { c.Gunzip = p.Gunzip }},
	}
	for e := range numEncodings {
		b := coderBits[e]
		f = append(f,
			conf.Inherited[LocConf]{Bit: b[0], Take: func(c, p *LocConf) { c.Coders[e].On = p.Coders[e].On }},
			conf.Inherited[LocConf]{Bit: b[1], Take: func(c, p *LocConf) { c.Coders[e].Level = p.Coders[e].Level }},
			conf.Inherited[LocConf]{Bit: b[2], Take: func(c, p *LocConf) { c.Coders[e].MinLength = p.Coders[e].MinLength }},
			conf.Inherited[LocConf]{Bit: b[3], Take: func(c, p *LocConf) { c.Coders[e].Types = p.Coders[e].Types }},
			conf.Inherited[LocConf]{Bit: staticBits[e], Take: func(c, p *LocConf) { c.Static[e] = p.Static[e] }},
		)
	}
	return f
}()

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

func directives() []conf.Directive {
	d := []conf.Directive{
		{Name: "gzip_vary", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Vary }, bitVary),
			Syntax: "gzip_vary on | off;", Default: "off",
			Doc: "Adds Vary: Accept-Encoding to responses gzip, gunzip, brotli or zstd looked at (compressed or not: their type and length qualified)."},
		{Name: "gzip_http_version", Contexts: hsl, Args: conf.Args1, Set: setHTTPVersion,
			Syntax: "gzip_http_version 1.0 | 1.1;", Default: "1.1",
			Doc: "The least HTTP version of a request whose response is compressed (by any encoding)."},
		{Name: "gzip_proxied", Contexts: hsl, Args: conf.Args1More, Set: setProxied,
			Syntax: "gzip_proxied off | expired | no-cache | no-store | private | no_last_modified | no_etag | auth | any ...;", Default: "off",
			Doc: "Whether to compress for a request with Via, from the request's Authorization and the response's Expires, Cache-Control, Last-Modified and ETag, as nginx (for every encoding)."},
		{Name: "gzip_disable", Contexts: hsl, Args: conf.Args1More, Set: setDisable,
			Syntax: "gzip_disable regex | msie6 ...;",
			Doc:    "No compression (any encoding) for a User-Agent a case-insensitive regex matches; msie6 for MSIE 4-6 without SV1. \"degradation\" is a regex too, as in nginx built without the degradation module (Debian's)."},
		{Name: "gzip_buffers", Contexts: hsl, Args: conf.Args2, Set: setBuffers,
			Syntax: "gzip_buffers number size;", Default: "32 4k",
			Doc: "Bounds the compressed bytes (any encoding) held before they are passed to the connection: number*size."},
		{Name: "gunzip", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Gunzip }, bitGunzip),
			Syntax: "gunzip on | off;", Default: "off",
			Doc: "Decompresses a response with Content-Encoding: gzip for a client gzip is not sent to (as gzip's checks decide), streaming."},
	}
	for e := range numEncodings {
		d = append(d, coderDirectives(e)...)
		d = append(d, staticDirective(e))
	}
	return d
}

// coderDirectives are one encoding's directives: NAME, NAME_comp_level,
// NAME_min_length, NAME_types.
func coderDirectives(e Encoding) []conf.Directive {
	name := [numEncodings]string{"gzip", "brotli", "zstd"}[e]
	what := [numEncodings]string{"gzip", "brotli (br)", "zstd"}[e]
	b := coderBits[e]
	lr := levelRange[e]
	return []conf.Directive{
		{Name: name, Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Coders[e].On }, b[0]),
			Syntax: name + " on | off;", Default: "off",
			Doc: "Compresses responses with " + what + " as they stream (200, 403 and 404; not already encoded), for clients that accept it. Of the codings on, the one Accept-Encoding gives the highest q-value wins; at equal q-values br, then zstd, then gzip."},
		{Name: name + "_comp_level", Contexts: hsl, Args: conf.Args1, Set: setLevel(e, b[1]),
			Syntax: name + "_comp_level level;", Default: fmt.Sprint(defaultLevel[e]),
			Doc: fmt.Sprintf("The %s compression level, %d to %d.", what, lr[0], lr[1]) + levelNote[e]},
		{Name: name + "_min_length", Contexts: hsl, Args: conf.Args1, Set: setMinLength(e, b[2]),
			Syntax: name + "_min_length length;", Default: "20",
			Doc: "The least Content-Length compressed; a response of unknown length is compressed."},
		{Name: name + "_types", Contexts: hsl, Args: conf.Args1More, Set: setTypes(e, b[3]),
			Syntax: name + "_types mime-type ...;", Default: "text/html",
			Doc: "The types compressed besides text/html; * for any."},
	}
}

func locConf(c *conf.Cursor) *LocConf { return c.HTTPConf().(*LocConf) }

func setMask(lc *LocConf) *uint64 { return &lc.set }

// setFlag stores on|off (checked by the parser: Flag arity).
func setFlag(field func(*LocConf) *bool, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseFlag, field, setMask, bit)
}

func setHTTPVersion(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	switch s.Args[0].Value {
	case "1.0":
		lc.HTTPMinor = 0
	case "1.1":
		lc.HTTPMinor = 1
	default:
		return s.InvalidValue(s.Args[0], `it must be "1.0" or "1.1"`)
	}
	lc.set |= bitHTTPVersion
	return nil
}

func setProxied(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	var p Proxied
	for _, a := range s.Args {
		f, ok := proxiedNames[a.Value]
		if !ok {
			return s.InvalidValue(a, "")
		}
		p |= f
	}
	lc.Proxied = p
	lc.set |= bitProxied
	return nil
}

func setDisable(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	for _, a := range s.Args {
		if a.Value == "msie6" {
			lc.DisableMSIE6 = true
			continue
		}
		re, err := pcre.Compile(a.Value, true)
		if err != nil {
			return s.InvalidValue(a, err.Error())
		}
		lc.Disable = append(lc.Disable, re)
	}
	lc.set |= bitDisable
	return nil
}

func setBuffers(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	n, err := conf.ParseNumber(s.Args[0].Value)
	if err != nil || n < 1 {
		return s.InvalidValue(s.Args[0], "")
	}
	size, err := conf.ParseSize(s.Args[1].Value)
	if err != nil || size < 1 || size*int64(n) > 1<<30 {
		return s.InvalidValue(s.Args[1], "")
	}
	lc.BufNum, lc.BufSize = n, int(size)
	lc.set |= bitBuffers
	return nil
}

func setLevel(e Encoding, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		n, err := conf.ParseNumber(s.Args[0].Value)
		lr := levelRange[e]
		if err != nil {
			return s.InvalidValue(s.Args[0], "")
		}
		if n < lr[0] || n > lr[1] {
			return s.Errorf("value must be between %d and %d", lr[0], lr[1])
		}
		lc := locConf(c)
		lc.Coders[e].Level = n
		lc.set |= bit
		return nil
	}
}

func setMinLength(e Encoding, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseSize, func(lc *LocConf) *int64 { return &lc.Coders[e].MinLength }, setMask, bit)
}

func setTypes(e Encoding, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		lc := locConf(c)
		t := Types{names: map[string]bool{"text/html": true}}
		for _, a := range s.Args {
			if a.Value == "*" {
				t = Types{Any: true}
				break
			}
			t.names[strings.ToLower(a.Value)] = true
		}
		lc.Coders[e].Types = t
		lc.set |= bit
		return nil
	}
}
