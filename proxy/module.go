package proxy

import (
	"errors"
	"fmt"
	"github.com/numaproxy/numaproxy/pcre"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/httpcore/http1"
	"github.com/numaproxy/numaproxy/tls"
	"github.com/numaproxy/numaproxy/upstream"
)

// Module declares the proxy's directives. Their values live in a LocConf at every
// http level and are inherited downward as nginx does.
var Module = &conf.Module{
	Name:       "proxy",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { return child.(*LocConf).inherit(parent.(*LocConf)) },
	Check:      check,
	Ctx:        &httpcore.Hooks{Variables: variables, Init: initModule, NewLoop: newLoop, Key: key},
}

// self is Module, for the code that runs requests (Module's own initialiser cannot
// name it).
var self *conf.Module

func init() { self = Module }

// key is the module's slot for its loop state, snapshot state and request contexts.
var key = httpcore.NewKey()

const (
	hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx
	hs  = conf.HTTPCtx | conf.ServerCtx
)

func directives() []conf.Directive {
	return append(cacheDirectives(), []conf.Directive{
		{Name: "proxy_pass", Contexts: conf.LocationCtx | conf.LocIfCtx | conf.LmtCtx, Args: conf.Args1, Set: setProxyPass,
			Syntax: "proxy_pass http://upstream[:port][/uri] | http://unix:/path[:/uri];",
			Doc:    "Forwards requests to an upstream group, host:port or unix-domain socket (Host: localhost). With a URI part, the part of the request URI that matched the location is replaced by it. With variables the URL is made for each request: a host that names an upstream block (no port) uses it, an IP address is used as is, another name is looked up with the location's resolver (none: 502); a URI part, if any, is then the whole URI sent."},
		{Name: "proxy_set_header", Contexts: hsl, Args: conf.Args2, Multi: true, Set: setProxySetHeader,
			Syntax: "proxy_set_header field value;", Default: "Host $proxy_host; Connection close",
			Doc: "Sets a request header sent upstream (variables allowed; an empty value removes it). A level that sets any replaces all inherited ones."},
		{Name: "proxy_hide_header", Contexts: hsl, Args: conf.Args1, Multi: true, Set: setNameList(func(c *LocConf) *[]string { return &c.HideHeaders }, bitHide),
			Syntax: "proxy_hide_header field;",
			Doc:    "Does not pass this upstream response header to the client (Date, Server, X-Pad, X-Accel-* are hidden by default)."},
		{Name: "proxy_pass_header", Contexts: hsl, Args: conf.Args1, Multi: true, Set: setNameList(func(c *LocConf) *[]string { return &c.PassHeaders }, bitPassHeaders),
			Syntax: "proxy_pass_header field;",
			Doc:    "Passes a response header that is hidden by default (e.g. Server)."},
		{Name: "proxy_http_version", Contexts: hsl, Args: conf.Args1, Set: setHTTPVersion,
			Syntax: "proxy_http_version 1.0 | 1.1;", Default: "1.0",
			Doc: "HTTP version of upstream requests; 1.1 with proxy_set_header Connection \"\" and keepalive in the upstream reuses connections."},
		{Name: "proxy_connect_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.ConnectTimeout }, bitConnectTimeout),
			Syntax: "proxy_connect_timeout time;", Default: "60s",
			Doc: "Longest wait for a connection to an upstream server."},
		{Name: "proxy_read_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.ReadTimeout }, bitReadTimeout),
			Syntax: "proxy_read_timeout time;", Default: "60s",
			Doc: "Longest wait between two reads from the upstream server."},
		{Name: "proxy_send_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.SendTimeout }, bitSendTimeout),
			Syntax: "proxy_send_timeout time;", Default: "60s",
			Doc: "Longest wait between two writes to the upstream server."},
		{Name: "proxy_next_upstream", Contexts: hsl, Args: conf.Args1More, Set: setNextUpstream,
			Syntax: "proxy_next_upstream error | timeout | invalid_header | http_500 | http_502 | http_503 | http_504 | http_403 | http_404 | http_429 | non_idempotent | off ...;", Default: "error timeout",
			Doc: "When a request is passed to the next server. Never after part of the response reached the client; POST, LOCK and PATCH only with non_idempotent."},
		{Name: "proxy_next_upstream_tries", Contexts: hsl, Args: conf.Args1, Set: setNumber(func(c *LocConf) *int { return &c.NextUpstreamTries }, bitNextTries),
			Syntax: "proxy_next_upstream_tries number;", Default: "0",
			Doc: "Most tries of one request (0: no limit)."},
		{Name: "proxy_next_upstream_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.NextUpstreamTimeout }, bitNextTimeout),
			Syntax: "proxy_next_upstream_timeout time;", Default: "0",
			Doc: "Longest time over which a request may be passed to further servers (0: no limit)."},
		{Name: "proxy_buffering", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Buffering }, bitBuffering),
			Syntax: "proxy_buffering on | off;", Default: "on",
			Doc: "on: read the upstream response ahead of a slow client up to the loop's write buffer; off: read only as fast as the client takes it. Memory stays bounded either way. An upstream's X-Accel-Buffering: yes|no overrides it for its response (unless proxy_ignore_headers names it)."},
		{Name: "proxy_request_buffering", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.RequestBuffering }, bitRequestBuffering),
			Syntax: "proxy_request_buffering on | off;", Default: "on",
			Doc: "on: the whole request body is read (in memory up to client_body_buffer_size, beyond it in a temporary file under client_body_temp_path) before the upstream is chosen and sent the request with its length, so a retry resends it; off: the body streams to the upstream as it arrives (chunked from a chunked client with proxy_http_version 1.1)."},
		{Name: "proxy_redirect", Contexts: hsl, Args: conf.Args1 | conf.Args2, Multi: true, Set: setProxyRedirect,
			Syntax: "proxy_redirect default | off | redirect replacement;", Default: "default",
			Doc: "Rewrites Location and Refresh headers of upstream responses; default maps the proxy_pass URL to the location prefix. The redirect is a prefix or a regex (~, ~* without case), the replacement may hold variables and the regex's captures; the first that matches applies."},
		{Name: "proxy_intercept_errors", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.InterceptErrors }, bitInterceptErrors),
			Syntax: "proxy_intercept_errors on | off;", Default: "off",
			Doc: "An upstream response with a status of 300 or more that the location's error_page names is replaced by that error page (a 401 keeps the upstream's WWW-Authenticate)."},
		{Name: "proxy_buffer_size", Contexts: hsl, Args: conf.Args1, Set: atBuffersPos(setSize(func(c *LocConf) *int { return &c.BufferSize }, bitBufferSize)),
			Syntax: "proxy_buffer_size size;", Default: "4k|8k",
			Doc: "Largest upstream response head (status line and fields); a larger one is an invalid header: \"upstream sent too big header\", the next server per proxy_next_upstream invalid_header, else 502. One memory page by default."},
		{Name: "proxy_buffers", Contexts: hsl, Args: conf.Args2, Set: setProxyBuffers,
			Syntax: "proxy_buffers number size;", Default: "8 4k|8k",
			Doc: "Memory a buffered response may hold for a client that reads slower than the upstream sends (number × size, at least 2 buffers): past it the response goes on to a temporary file (proxy_max_temp_file_size) so that the upstream connection is freed, and the client is fed from the file."},
		{Name: "proxy_busy_buffers_size", Contexts: hsl, Args: conf.Args1, Set: atBuffersPos(setSize(func(c *LocConf) *int { return &c.BusyBuffersSize }, bitBusyBuffers)), NoEffect: true,
			Syntax: "proxy_busy_buffers_size size;", Default: "8k|16k",
			Doc: "Checked against proxy_buffer_size and proxy_buffers by nginx's rules; it sizes nginx's split of its buffers between reading and sending, and numaproxy's one queue per client has no such split (proxy_buffers bounds it)."},
		{Name: "proxy_max_temp_file_size", Contexts: hsl, Args: conf.Args1, Set: setTempFileSize(func(c *LocConf) *int64 { return &c.MaxTempFileSize }, bitMaxTempFile),
			Syntax: "proxy_max_temp_file_size size;", Default: "1024m",
			Doc: "Largest temporary file one buffered response may fill; once it is full, the upstream is read only as fast as the client takes the response. 0 disables temporary files."},
		{Name: "proxy_temp_file_write_size", Contexts: hsl, Args: conf.Args1, Set: atBuffersPos(setSize(func(c *LocConf) *int { return &c.TempFileWriteSize }, bitTempFileWrite)), NoEffect: true,
			Syntax: "proxy_temp_file_write_size size;", Default: "8k|16k",
			Doc: "Checked as nginx checks it; numaproxy writes to the temporary file what each upstream read brings, at once."},
		{Name: "proxy_temp_path", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3 | conf.Args4, Set: setProxyTempPath,
			Syntax: "proxy_temp_path path [level1 [level2 [level3]]];", Default: "proxy_temp",
			Doc: "Directory of the temporary files of buffered responses, created at start if missing. The files are unlinked as soon as they are created (nothing is left after a crash), so the levels are accepted but make no subdirectories."},
		{Name: "proxy_method", Contexts: hsl, Args: conf.Args1, Set: setProxyMethod,
			Syntax: "proxy_method method;",
			Doc:    "The method of upstream requests instead of the client's (variables allowed; a value that is empty uses the client's, one that is not a token answers 500)."},
		{Name: "proxy_pass_request_body", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.PassRequestBody }, bitPassRequestBody),
			Syntax: "proxy_pass_request_body on | off;", Default: "on",
			Doc: "off: the request body is read and dropped, not sent upstream; as in nginx the Content-Length of the client's body is still sent (a chunked body is read whole to count it) unless proxy_set_header Content-Length \"\" removes it. Such an upstream connection is not kept alive."},
		{Name: "proxy_pass_request_headers", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.PassRequestHeaders }, bitPassRequestHeaders),
			Syntax: "proxy_pass_request_headers on | off;", Default: "on",
			Doc: "off: only the proxy_set_header fields (and the body's framing) go upstream, none of the client's."},
		{Name: "proxy_bind", Contexts: hsl, Args: conf.Args1 | conf.Args2, Set: setProxyBind,
			Syntax: "proxy_bind address [transparent] | off;",
			Doc:    "Source address (and optional port) of upstream connections; variables allowed (an empty value binds nothing, an invalid one is logged and ignored). transparent lets it be a foreign address (IP_TRANSPARENT, needs CAP_NET_ADMIN and policy routing). A bind that fails answers 500."},
		{Name: "proxy_socket_keepalive", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.SocketKeepalive }, bitSocketKeepalive),
			Syntax: "proxy_socket_keepalive on | off;", Default: "off",
			Doc: "Sets SO_KEEPALIVE on upstream connections (the kernel's keep-alive probes, with its tcp_keepalive_* settings)."},
		{Name: "proxy_cookie_domain", Contexts: hsl, Args: conf.Args1 | conf.Args2, Multi: true, Set: setCookieRewrite(true),
			Syntax: "proxy_cookie_domain off | domain replacement;", Default: "off",
			Doc: "Rewrites the domain attribute of upstream Set-Cookie fields: a domain (compared whole, any case, leading dots aside) or ~regex (any case), replaced with variables and $1..$9 of the regex. The first that matches applies."},
		{Name: "proxy_cookie_path", Contexts: hsl, Args: conf.Args1 | conf.Args2, Multi: true, Set: setCookieRewrite(false),
			Syntax: "proxy_cookie_path off | path replacement;", Default: "off",
			Doc: "Rewrites the path attribute of upstream Set-Cookie fields: a prefix, ~regex or ~*regex (any case), replaced with variables and $1..$9 of the regex. The first that matches applies."},
		{Name: "proxy_ignore_client_abort", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.IgnoreClientAbort }, bitIgnoreClientAbort),
			Syntax: "proxy_ignore_client_abort on | off;", Default: "off",
			Doc: "on: a client that closes its connection once its request is sent does not end the upstream exchange; the response is read whole and dropped, and the upstream connection is kept alive if it can be."},
		{Name: "proxy_protocol", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ProxyProtocol }, bitProxyProtocol),
			Syntax: "proxy_protocol on | off;", Default: "off",
			Doc: "on: each upstream connection starts with a PROXY protocol v1 header naming the client's address ($remote_addr's) and the address it connected to, as nginx's stream module's proxy_protocol does (nginx's http proxy has no such directive), in clear before the TLS handshake of an https upstream. Such a connection belongs to its client: it is not kept alive for others."},
		{Name: "proxy_ignore_headers", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setIgnoreHeaders,
			Syntax: "proxy_ignore_headers field ...;",
			Doc:    "Upstream response fields not to act on: X-Accel-Redirect (else an internal redirect to its URI or @name, as GET, carrying Content-Type, Set-Cookie, Content-Disposition, Cache-Control, Expires and Accept-Ranges over), X-Accel-Buffering (else yes|no overrides proxy_buffering), X-Accel-Limit-Rate (else the response's limit_rate in bytes per second). X-Accel-Expires, Expires, Cache-Control, Set-Cookie and Vary: what proxy_cache_valid says of them. X-Accel-Charset (for charset conversion) is accepted and numaproxy never acts on it: it has no charset conversion yet."},
	}...)
}

// LocConf holds the proxy directives at one level, after inheritance.
type LocConf struct {
	Pass *PassTarget // proxy_pass; nil when the location does not proxy

	SetHeaders  []HeaderSetting // proxy_set_header, nginx's defaults included
	HideHeaders []string        // lower-case
	PassHeaders []string        // lower-case
	HTTPMinor   int             // proxy_http_version: 0 or 1

	ConnectTimeout, ReadTimeout, SendTimeout time.Duration

	NextUpstream        NextUpstream
	NextUpstreamTries   int
	NextUpstreamTimeout time.Duration

	Buffering         bool
	RequestBuffering  bool // proxy_request_buffering
	BuffersNumber     int  // proxy_buffers
	BuffersSize       int
	BusyBuffersSize   int // proxy_busy_buffers_size; 0: twice the larger of a buffer and proxy_buffer_size
	TempFileWriteSize int // proxy_temp_file_write_size; 0: the same default
	MaxTempFileSize   int64
	TempPath          *httpcore.TempPath // never nil once the config is checked
	buffersPos        conf.Pos           // where proxy_buffers, or a size checked against it, was set
	Redirects         []Redirect         // nil with proxy_redirect off
	redirectDefault   bool

	InterceptErrors    bool
	BufferSize         int                // proxy_buffer_size: the largest upstream response head
	Method             *httpcore.Template // proxy_method; nil: the client's
	PassRequestBody    bool
	PassRequestHeaders bool
	Bind               *Bind // proxy_bind; nil: off
	SocketKeepalive    bool
	CookieDomains      []CookieRewrite // nil: off
	CookiePaths        []CookieRewrite // nil: off
	IgnoreClientAbort  bool
	IgnoreHeaders      IgnoreHeaders
	ProxyProtocol      bool // proxy_protocol: a PROXY v1 header starts each upstream connection
	Cache              CacheConf
	cachePaths         []*cacheZone // proxy_cache_path, at the http level

	set uint64 // which fields this level set itself (bit* below)
}

// Bits of LocConf.set, one per directive, for nginx's "inherit unless set here".
const (
	bitPass = 1 << iota
	bitSetHeaders
	bitHide
	bitPassHeaders
	bitHTTPVersion
	bitConnectTimeout
	bitReadTimeout
	bitSendTimeout
	bitNextUpstream
	bitNextTries
	bitNextTimeout
	bitBuffering
	bitRequestBuffering
	bitBuffers
	bitBusyBuffers
	bitMaxTempFile
	bitTempFileWrite
	bitTempPath
	bitRedirect
	bitInterceptErrors
	bitBufferSize
	bitMethod
	bitPassRequestBody
	bitPassRequestHeaders
	bitBind
	bitSocketKeepalive
	bitCookieDomains
	bitCookiePaths
	bitIgnoreClientAbort
	bitIgnoreHeaders
	bitProxyProtocol
)

// PassTarget is a parsed proxy_pass URL.
type PassTarget struct {
	URL     string // as written
	Host    string // upstream name or host[:port] as written
	HasPort bool
	URI     string // the URI part; "" when none
	HasURI  bool
	Unix    bool // http://unix:/path[:/uri]: Host is "unix:/path"
	Pos     conf.Pos
	Group   *upstream.Group // resolved once the whole file is read (check)
	// Value is a URL made of variables, evaluated for each request (target.go);
	// then only URL and Pos are set.
	Value *httpcore.Template
	// HTTPS: an https:// upstream, whose connections take TLS (made in check
	// from the location's proxy_ssl_* directives).
	HTTPS bool
	TLS   *tls.ClientConfig
	loc   *conf.Location
}

// HeaderSetting is one proxy_set_header.
type HeaderSetting struct {
	Name  string // as written
	Value *httpcore.Template
}

// Redirect is one proxy_redirect pair: a prefix (variables allowed) or a regex
// (~, ~* caseless) and the replacement (variables and the regex's captures allowed).
type Redirect struct {
	From, To  string // as written
	from      *httpcore.Template
	fromBytes []byte // From, when from is static
	re        *pcre.Regexp
	to        *httpcore.Template
}

// NextUpstream is the proxy_next_upstream conditions, a bit set.
type NextUpstream uint32

const (
	NextError NextUpstream = 1 << iota
	NextTimeout
	NextInvalidHeader
	NextHTTP500
	NextHTTP502
	NextHTTP503
	NextHTTP504
	NextHTTP403
	NextHTTP404
	NextHTTP429
	NextNonIdempotent
)

var nextUpstreamNames = map[string]NextUpstream{
	"error": NextError, "timeout": NextTimeout, "invalid_header": NextInvalidHeader,
	"http_500": NextHTTP500, "http_502": NextHTTP502, "http_503": NextHTTP503, "http_504": NextHTTP504,
	"http_403": NextHTTP403, "http_404": NextHTTP404, "http_429": NextHTTP429, "non_idempotent": NextNonIdempotent,
}

// ForStatus returns the condition of an upstream status, 0 when none applies.
func (n NextUpstream) ForStatus(code int) NextUpstream {
	var c NextUpstream
	switch code {
	case 500:
		c = NextHTTP500
	case 502:
		c = NextHTTP502
	case 503:
		c = NextHTTP503
	case 504:
		c = NextHTTP504
	case 403:
		c = NextHTTP403
	case 404:
		c = NextHTTP404
	case 429:
		c = NextHTTP429
	}
	return n & c
}

// defaults is the http-level config before any directive: nginx's defaults.
func defaults() LocConf {
	return LocConf{
		SetHeaders: []HeaderSetting{
			{Name: "Host", Value: ownVariables.MustCompile("$proxy_host")},
			{Name: "Connection", Value: ownVariables.MustCompile("close")},
		},
		HideHeaders:        nil,
		ConnectTimeout:     60 * time.Second,
		ReadTimeout:        60 * time.Second,
		SendTimeout:        60 * time.Second,
		NextUpstream:       NextError | NextTimeout,
		Buffering:          true,
		RequestBuffering:   true,
		BuffersNumber:      8,
		BuffersSize:        os.Getpagesize(),
		MaxTempFileSize:    1 << 30,
		redirectDefault:    true,
		BufferSize:         os.Getpagesize(), // nginx's one page
		PassRequestBody:    true,
		PassRequestHeaders: true,
		Cache:              cacheDefaults(),
	}
}

// inherit fills what this level did not set from its parent, nginx's merge (the
// http level from nginx's defaults first).
func (c *LocConf) inherit(parent *LocConf) error {
	conf.Inherit(c, parent, func(lc *LocConf) *uint64 { return &lc.set }, defaults, inheritedFields)
	return c.checkBuffers()
}

// checkBuffers applies nginx's rules between the buffer sizes of a level
// (ngx_http_proxy_merge_loc_conf), with its messages.
func (c *LocConf) checkBuffers() error {
	if c.set&(bitBuffers|bitBusyBuffers|bitMaxTempFile|bitTempFileWrite|bitBufferSize) == 0 {
		return nil // inherited whole: checked where it was set
	}
	fail := func(msg string) error { return &conf.Error{Pos: c.buffersPos, Msg: msg} }
	if c.BuffersNumber < 2 {
		return fail(`there must be at least 2 "proxy_buffers"`)
	}
	size := max(c.BufferSize, c.BuffersSize)
	busy := c.BusyBuffersSize
	if busy == 0 {
		busy = 2 * size
	}
	if busy < size {
		return fail(`"proxy_busy_buffers_size" must be equal to or greater than the maximum of the value of "proxy_buffer_size" and one of the "proxy_buffers"`)
	}
	if busy > (c.BuffersNumber-1)*c.BuffersSize {
		return fail(`"proxy_busy_buffers_size" must be less than the size of all "proxy_buffers" minus one buffer`)
	}
	if w := c.TempFileWriteSize; w != 0 && w < size {
		return fail(`"proxy_temp_file_write_size" must be equal to or greater than the maximum of the value of "proxy_buffer_size" and one of the "proxy_buffers"`)
	}
	if m := c.MaxTempFileSize; m != 0 && m < int64(size) {
		return fail(`"proxy_max_temp_file_size" must be equal to zero to disable temporary files usage or must be equal to or greater than the maximum of the value of "proxy_buffer_size" and one of the "proxy_buffers"`)
	}
	return nil
}

// ResponseMemory is what a buffered response may hold in memory for a slow client
// before it goes on to a temporary file: proxy_buffers' number × size.
func (c *LocConf) ResponseMemory() int { return c.BuffersNumber * c.BuffersSize }

// inheritedFields copies each directive's value from the parent level when this level
// did not set it. proxy_pass and return are not inherited, as in nginx: a nested
// location without its own proxy_pass does not proxy, and a server-level return runs
// before any location is chosen (see client.go).
var inheritedFields = append(cacheInherited, []conf.Inherited[LocConf]{
	{Bit: bitSetHeaders, Take: func(c, p *LocConf) { c.SetHeaders = p.SetHeaders }},
	{Bit: bitHide, Take: func(c, p *LocConf) { c.HideHeaders = p.HideHeaders }},
	{Bit: bitPassHeaders, Take: func(c, p *LocConf) { c.PassHeaders = p.PassHeaders }},
	{Bit: bitHTTPVersion, Take: func(c, p *LocConf) { c.HTTPMinor = p.HTTPMinor }},
	{Bit: bitConnectTimeout, Take: func(c, p *LocConf) { c.ConnectTimeout = p.ConnectTimeout }},
	{Bit: bitReadTimeout, Take: func(c, p *LocConf) { c.ReadTimeout = p.ReadTimeout }},
	{Bit: bitSendTimeout, Take: func(c, p *LocConf) { c.SendTimeout = p.SendTimeout }},
	{Bit: bitNextUpstream, Take: func(c, p *LocConf) { c.NextUpstream = p.NextUpstream }},
	{Bit: bitNextTries, Take: func(c, p *LocConf) { c.NextUpstreamTries = p.NextUpstreamTries }},
	{Bit: bitNextTimeout, Take: func(c, p *LocConf) { c.NextUpstreamTimeout = p.NextUpstreamTimeout }},
	{Bit: bitBuffering, Take: func(c, p *LocConf) { c.Buffering = p.Buffering }},
	{Bit: bitRequestBuffering, Take: func(c, p *LocConf) { c.RequestBuffering = p.RequestBuffering }},
	{Bit: bitBuffers, Take: func(c, p *LocConf) { c.BuffersNumber, c.BuffersSize = p.BuffersNumber, p.BuffersSize }},
	{Bit: bitBusyBuffers, Take: func(c, p *LocConf) { c.BusyBuffersSize = p.BusyBuffersSize }},
	{Bit: bitMaxTempFile, Take: func(c, p *LocConf) { c.MaxTempFileSize = p.MaxTempFileSize }},
	{Bit: bitTempFileWrite, Take: func(c, p *LocConf) { c.TempFileWriteSize = p.TempFileWriteSize }},
	{Bit: bitTempPath, Take: func(c, p *LocConf) { c.TempPath = p.TempPath }},
	{Bit: bitRedirect, Take: func(c, p *LocConf) { c.Redirects, c.redirectDefault = p.Redirects, p.redirectDefault }},
	{Bit: bitInterceptErrors, Take: func(c, p *LocConf) { c.InterceptErrors = p.InterceptErrors }},
	{Bit: bitBufferSize, Take: func(c, p *LocConf) { c.BufferSize = p.BufferSize }},
	{Bit: bitMethod, Take: func(c, p *LocConf) { c.Method = p.Method }},
	{Bit: bitPassRequestBody, Take: func(c, p *LocConf) { c.PassRequestBody = p.PassRequestBody }},
	{Bit: bitPassRequestHeaders, Take: func(c, p *LocConf) { c.PassRequestHeaders = p.PassRequestHeaders }},
	{Bit: bitBind, Take: func(c, p *LocConf) { c.Bind = p.Bind }},
	{Bit: bitSocketKeepalive, Take: func(c, p *LocConf) { c.SocketKeepalive = p.SocketKeepalive }},
	{Bit: bitCookieDomains, Take: func(c, p *LocConf) { c.CookieDomains = p.CookieDomains }},
	{Bit: bitCookiePaths, Take: func(c, p *LocConf) { c.CookiePaths = p.CookiePaths }},
	{Bit: bitIgnoreClientAbort, Take: func(c, p *LocConf) { c.IgnoreClientAbort = p.IgnoreClientAbort }},
	{Bit: bitIgnoreHeaders, Take: func(c, p *LocConf) { c.IgnoreHeaders = p.IgnoreHeaders }},
	{Bit: bitProxyProtocol, Take: func(c, p *LocConf) { c.ProxyProtocol = p.ProxyProtocol }},
}...)

func locConf(c *conf.Cursor) *LocConf { return c.HTTPConf().(*LocConf) }

func setMask(lc *LocConf) *uint64 { return &lc.set }

func setDuration(field func(*LocConf) *time.Duration, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseTime, field, setMask, bit)
}

func setNumber(field func(*LocConf) *int, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseNumber, field, setMask, bit)
}

// setSize is for buffer sizes: 1 byte to 1 GiB.
func setSize(field func(*LocConf) *int, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseBufferSize, field, setMask, bit)
}

// setFlag stores on|off (checked by the parser: Flag arity).
func setFlag(field func(*LocConf) *bool, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseFlag, field, setMask, bit)
}

func setNameList(field func(*LocConf) *[]string, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		lc := locConf(c)
		*field(lc) = append(*field(lc), strings.ToLower(s.Args[0].Value))
		lc.set |= bit
		return nil
	}
}

func setProxyPass(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitPass != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	url := s.Args[0].Value
	if strings.Contains(url, "$") {
		// As nginx, a URL made of variables is checked when a request evaluates it
		// (target.go), not here.
		v, err := httpcore.CompileTemplate(c, url)
		if err != nil {
			return s.InvalidValue(s.Args[0], err.Error())
		}
		if !v.Static() {
			if err := httpcore.SetContentHandler(c, s, lc.content, true); err != nil {
				return err
			}
			lc.Pass = &PassTarget{URL: url, Value: v, Pos: s.Pos}
			lc.set |= bitPass
			return nil
		}
	}
	var rest string
	https := false
	switch {
	case strings.HasPrefix(strings.ToLower(url), "http://"):
		rest = url[len("http://"):]
	case strings.HasPrefix(strings.ToLower(url), "https://"):
		rest, https = url[len("https://"):], true
	default:
		return s.InvalidValue(s.Args[0], `invalid URL prefix`)
	}
	t := &PassTarget{URL: url, Host: rest, Pos: s.Pos, HTTPS: https, loc: c.Location}
	if len(rest) >= 5 && strings.EqualFold(rest[:5], "unix:") {
		// http://unix:/path/to/socket[:/uri]: the path ends at the next colon.
		t.Unix = true
		if i := strings.IndexByte(rest[5:], ':'); i >= 0 {
			t.Host, t.URI = rest[:5+i], rest[5+i+1:]
			t.HasURI = t.URI != ""
			if t.HasURI && t.URI[0] != '/' {
				return s.InvalidValue(s.Args[0], "the URI part after the socket path must start with \"/\"")
			}
		}
	} else if i := strings.IndexByte(rest, '/'); i >= 0 {
		t.Host, t.URI, t.HasURI = rest[:i], rest[i:], true
	}
	if t.Host == "" {
		return s.InvalidValue(s.Args[0], "no host")
	}
	if (!t.Unix && strings.ContainsAny(t.Host, "?#@")) || strings.ContainsAny(t.URI, "?# \t") {
		return s.InvalidValue(s.Args[0], "invalid URL")
	}
	if t.Unix {
		// No port, and never the name of an upstream block.
	} else if i := strings.LastIndexByte(t.Host, ':'); i >= 0 && !strings.HasSuffix(t.Host, "]") {
		t.HasPort = true
	} else if strings.HasPrefix(t.Host, "[") && strings.Contains(t.Host, "]:") {
		t.HasPort = true
	}
	if t.HasURI && c.Location != nil {
		switch c.Location.Kind {
		case conf.LocRegex, conf.LocRegexCaseless:
			return s.Errorf("\"proxy_pass\" cannot have URI part in location given by regular expression")
		case conf.LocNamed:
			return s.Errorf("\"proxy_pass\" cannot have URI part in named location")
		case conf.LocIf:
			return s.Errorf("\"proxy_pass\" cannot have URI part inside \"if\" statement")
		case conf.LocLimitExcept:
			return s.Errorf("\"proxy_pass\" cannot have URI part inside \"limit_except\" block")
		}
	}
	if err := httpcore.SetContentHandler(c, s, lc.content, true); err != nil {
		return err
	}
	lc.Pass = t
	lc.set |= bitPass
	return nil
}

func setProxySetHeader(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitSetHeaders == 0 {
		// The first at this level: nginx's defaults stay unless this level sets the
		// same field (they are not inherited settings but the module's own).
		lc.SetHeaders = append([]HeaderSetting(nil), defaults().SetHeaders...)
		lc.set |= bitSetHeaders
	}
	if !http1.IsToken(s.Args[0].Value) {
		return s.InvalidValue(s.Args[0], "not a header field name")
	}
	t, err := httpcore.CompileTemplate(c, s.Args[1].Value)
	if err != nil {
		return s.InvalidValue(s.Args[1], err.Error())
	}
	for i, h := range lc.SetHeaders {
		if strings.EqualFold(h.Name, s.Args[0].Value) {
			lc.SetHeaders[i] = HeaderSetting{Name: s.Args[0].Value, Value: t}
			return nil
		}
	}
	lc.SetHeaders = append(lc.SetHeaders, HeaderSetting{Name: s.Args[0].Value, Value: t})
	return nil
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

func setNextUpstream(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	var n NextUpstream
	for _, a := range s.Args {
		if a.Value == "off" {
			if len(s.Args) > 1 {
				return s.InvalidValue(a, `"off" stands alone`)
			}
			continue
		}
		bit, ok := nextUpstreamNames[a.Value]
		if !ok {
			return s.InvalidValue(a, "")
		}
		n |= bit
	}
	lc.NextUpstream = n
	lc.set |= bitNextUpstream
	return nil
}

func setProxyRedirect(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitRedirect == 0 {
		lc.Redirects, lc.redirectDefault = nil, false
		lc.set |= bitRedirect
	}
	if len(s.Args) == 1 {
		switch s.Args[0].Value {
		case "off":
			lc.Redirects, lc.redirectDefault = nil, false
		case "default":
			if lc.Pass != nil && lc.Pass.Value != nil {
				return s.Errorf("\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables")
			}
			lc.redirectDefault = true
		default:
			return s.InvalidValue(s.Args[0], `it must be "default", "off" or a pair`)
		}
		return nil
	}
	rd := Redirect{From: s.Args[0].Value, To: s.Args[1].Value}
	var err error
	if pattern, ok := strings.CutPrefix(rd.From, "~"); ok {
		caseless := strings.HasPrefix(pattern, "*")
		if caseless {
			pattern = pattern[1:]
		}
		if rd.re, err = pcre.Compile(pattern, caseless); err != nil {
			return s.Errorf("%v", err)
		}
		vars, err := httpcore.ConfigVariables(c)
		if err != nil {
			return s.Errorf("%v", err)
		}
		if err := vars.AddRegex(rd.re); err != nil {
			return s.Errorf("%v", err)
		}
	} else if rd.from, err = httpcore.CompileTemplate(c, rd.From); err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	} else {
		rd.fromBytes = []byte(rd.From)
	}
	if rd.to, err = httpcore.CompileTemplate(c, rd.To); err != nil {
		return s.InvalidValue(s.Args[1], err.Error())
	}
	lc.Redirects = append(lc.Redirects, rd)
	return nil
}

// setProxyBuffers reads "number size".
func setProxyBuffers(c *conf.Cursor, s *conf.Stmt) error {
	n, err := conf.ParseNumber(s.Args[0].Value)
	if err != nil || n < 1 {
		return s.InvalidValue(s.Args[0], "")
	}
	size, err := conf.ParseSize(s.Args[1].Value)
	if err != nil || size < 1 || size > 1<<30 || int64(n)*size > 1<<32 {
		return s.InvalidValue(s.Args[1], "")
	}
	lc := locConf(c)
	lc.BuffersNumber, lc.BuffersSize, lc.buffersPos = n, int(size), s.Pos
	lc.set |= bitBuffers
	return nil
}

// atBuffersPos records where a size checked against proxy_buffers was set.
func atBuffersPos(set func(*conf.Cursor, *conf.Stmt) error) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		locConf(c).buffersPos = s.Pos
		return set(c, s)
	}
}

// setTempFileSize reads a size that may be 0.
func setTempFileSize(field func(*LocConf) *int64, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		n, err := conf.ParseSize(s.Args[0].Value)
		if err != nil {
			return s.InvalidValue(s.Args[0], "")
		}
		lc := locConf(c)
		*field(lc), lc.buffersPos = n, s.Pos
		lc.set |= bit
		return nil
	}
}

func setProxyTempPath(c *conf.Cursor, s *conf.Stmt) error {
	p, err := httpcore.ParseTempPath(c, s)
	if err != nil {
		return err
	}
	lc := locConf(c)
	lc.TempPath = p
	lc.set |= bitTempPath
	return nil
}

// check resolves every proxy_pass target once the whole file is read, when every
// upstream block is known.
func check(cfg *conf.Config, self *conf.Module) error {
	if cfg.HTTP == nil {
		return nil
	}
	if err := checkCache(cfg, self); err != nil {
		return err
	}
	temp := &httpcore.TempPath{Dir: filepath.Join(cfg.Prefix, "proxy_temp")}
	made := map[string]bool{}
	if err := setTempPath(cfg.HTTP.Conf(self).(*LocConf), temp, made); err != nil {
		return err
	}
	var walk func(locs []*conf.Location) error
	walk = func(locs []*conf.Location) error {
		for _, loc := range locs {
			if err := setTempPath(loc.Conf(self).(*LocConf), temp, made); err != nil {
				return err
			}
			if lc := loc.Conf(self).(*LocConf); lc.Pass != nil && lc.Pass.Group == nil && lc.Pass.Value == nil {
				t := lc.Pass
				host, hasPort := t.Host, t.HasPort
				if t.HTTPS && !hasPort && !t.Unix && (upstream.GroupsOf(cfg).Lookup(host) == nil || upstream.GroupsOf(cfg).Lookup(host).Implicit) {
					host, hasPort = host+":443", true // https's port
				}
				g, err := upstream.ForProxyPass(cfg, host, hasPort)
				if err != nil {
					return &conf.Error{Pos: t.Pos, Msg: err.Error(), Err: err}
				}
				t.Group = g
				if t.HTTPS {
					at := t.loc
					if at == nil {
						at = loc
					}
					if t.TLS, err = tls.UpstreamConfig(at, t.Host); err != nil {
						if _, ok := err.(*conf.Error); !ok {
							err = &conf.Error{Pos: t.Pos, Msg: err.Error(), Err: err}
						}
						return err
					}
				}
			}
			if err := walk(loc.Locations); err != nil {
				return err
			}
		}
		return nil
	}
	for _, srv := range cfg.HTTP.Servers {
		if err := setTempPath(srv.Conf(self).(*LocConf), temp, made); err != nil {
			return err
		}
		if err := walk(srv.Locations); err != nil {
			return err
		}
	}
	return nil
}

// setTempPath gives a level without proxy_temp_path nginx's default, in the prefix,
// and makes the directory if it does not exist, as nginx does at start (the last
// component only, mode 0700).
func setTempPath(lc *LocConf, def *httpcore.TempPath, made map[string]bool) error {
	if lc.TempPath == nil {
		lc.TempPath = def
	}
	p := lc.TempPath
	if made[p.Dir] {
		return nil
	}
	made[p.Dir] = true
	if err := os.Mkdir(p.Dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return &conf.Error{Pos: p.Pos, Msg: fmt.Sprintf("mkdir() %q failed (%v)", p.Dir, errors.Unwrap(err)), Err: err}
	}
	return nil
}
