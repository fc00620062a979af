package httpcore

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// Module declares the HTTP core's directives (nginx's ngx_http_core_module): the
// client connection, request bodies, timeouts, keep-alive, error pages. Their values
// live in a LocConf at every http level and are inherited downward as nginx does.
var Module = &conf.Module{
	Name:       "http_core",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { return child.(*LocConf).inherit(parent.(*LocConf)) },
	Check:      check,
	NewMain:    func() any { return &configVars{} },
	Ctx:        &Hooks{Variables: append(coreVariables, miscVariables...)},
}

const (
	hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx
	hs  = conf.HTTPCtx | conf.ServerCtx
)

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "client_max_body_size", Contexts: hsl, Args: conf.Args1, Set: conf.SetValue(conf.ParseSize, func(c *LocConf) *int64 { return &c.ClientMaxBodySize }, setMask, bitClientMaxBody),
			Syntax: "client_max_body_size size;", Default: "1m",
			Doc: "Largest request body: a larger Content-Length gets 413 as soon as the location is chosen (before its return), a chunked body once it grows past it; the body is then read and dropped. 0 disables the check."},
		{Name: "client_body_buffer_size", Contexts: hsl, Args: conf.Args1, Set: setSize(func(c *LocConf) *int { return &c.ClientBodyBufferSize }, bitClientBodyBuffer),
			Syntax: "client_body_buffer_size size;", Default: "8k|16k",
			Doc: "Memory for a request body read whole before it goes upstream (a chunked body for proxy_http_version 1.0); beyond it the body goes to a temporary file. Two memory pages by default."},
		{Name: "client_body_temp_path", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3 | conf.Args4, Set: setClientBodyTempPath,
			Syntax: "client_body_temp_path path [level1 [level2 [level3]]];", Default: "client_body_temp",
			Doc: "Directory of the temporary files of request bodies, created at start if missing. The files are unlinked as soon as they are created (they have no name, so the levels make no subdirectories), except under client_body_in_file_only, whose files are named as nginx's, in the levels' subdirectories."},
		{Name: "client_body_in_file_only", Contexts: hsl, Args: conf.Args1, Set: setClientBodyInFileOnly,
			Syntax: "client_body_in_file_only on | clean | off;", Default: "off",
			Doc: "A request body read whole (proxy_request_buffering on, or proxy_pass_request_body off) is always written to a named file in client_body_temp_path ($request_body_file), even when it would fit in memory or is empty; on keeps the file after the request, clean deletes it when the request ends. The upload offload idiom: proxy_set_header X-File $request_body_file; proxy_pass_request_body off."},
		{Name: "client_body_in_single_buffer", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ClientBodyInSingle }, bitClientBodyInSingle), NoEffect: true,
			Syntax: "client_body_in_single_buffer on | off;", Default: "off",
			Doc: "The part of a request body kept in memory (up to client_body_buffer_size, $request_body) is always one buffer here."},
		{Name: "client_header_timeout", Contexts: hs, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.ClientHeaderTimeout }, bitClientHeaderTimeout),
			Syntax: "client_header_timeout time;", Default: "60s",
			Doc: "Longest time to receive a whole request head, counted from the accept or from its first byte (not restarted by each read); then the connection is closed without a response."},
		{Name: "client_body_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.ClientBodyTimeout }, bitClientBodyTimeout),
			Syntax: "client_body_timeout time;", Default: "60s",
			Doc: "Longest wait between two reads of the request body; then the connection is closed without an answer, as nginx (its 408 is only logged)."},
		{Name: "send_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.SendTimeout }, bitSendTimeout),
			Syntax: "send_timeout time;", Default: "60s",
			Doc: "Longest wait between two writes to the client; then the connection is closed."},
		{Name: "lingering_close", Contexts: hsl, Args: conf.Args1, Set: setLingeringClose,
			Syntax: "lingering_close off | on | always;", Default: "on",
			Doc: "How a client connection closes while the client may still be sending: on: when a request body or pipelined input is unread, the sending side is shut first and input read and dropped until the client is done (so it reads the whole answer, no reset); always: after every last response; off: at once."},
		{Name: "lingering_time", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.LingeringTime }, bitLingeringTime),
			Syntax: "lingering_time time;", Default: "30s",
			Doc: "Longest time input is read and dropped after an answer: the body of a request answered without it (a body not over by then closes the connection), then a lingering close."},
		{Name: "lingering_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.LingeringTimeout }, bitLingeringTimeout),
			Syntax: "lingering_timeout time;", Default: "5s",
			Doc: "Longest wait for more input while it is read and dropped; then the connection is closed."},
		{Name: "keepalive_timeout", Contexts: hsl, Args: conf.Args1 | conf.Args2, Set: setKeepaliveTimeout,
			Syntax: "keepalive_timeout timeout [header_timeout];", Default: "75s",
			Doc: "How long an idle client connection stays open (0 disables keep-alive); the second value is sent as Keep-Alive: timeout=N."},
		{Name: "keepalive_requests", Contexts: hsl, Args: conf.Args1, Set: setNumber(func(c *LocConf) *int { return &c.KeepaliveRequests }, bitKeepaliveRequests),
			Syntax: "keepalive_requests number;", Default: "1000",
			Doc: "Requests one client connection serves before it is closed."},
		{Name: "server_tokens", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ServerTokens }, bitServerTokens),
			Syntax: "server_tokens on | off;", Default: "on",
			Doc: "Shows the version in the Server header and error pages."},
		{Name: "error_page", Contexts: hsl | conf.LocIfCtx, Args: conf.Args2More, Multi: true, Set: setErrorPage,
			Syntax: "error_page code ... [=[response]] uri;",
			Doc:    "For numaproxy's own errors (and upstream ones with proxy_intercept_errors): an internal redirect to uri (with its own arguments) or @named location, as GET, or a 302 to a URL, optionally with another status. uri may hold variables, evaluated per error ($status is the error's or the =response one): the result decides between a URI, an @name and a URL. Not for a return with a text."},
		{Name: "recursive_error_pages", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.RecursiveErrorPages }, bitRecursiveErrorPages),
			Syntax: "recursive_error_pages on | off;", Default: "off",
			Doc: "Lets error_page act again on an error of the page it redirected to, up to 10 internal redirects in all (the 11th answers 500, as nginx's redirection cycle)."},
		{Name: "client_header_buffer_size", Contexts: hs, Args: conf.Args1, Set: setSize(func(c *LocConf) *int { return &c.ClientHeaderBufferSize }, bitClientHeaderBuffer),
			Syntax: "client_header_buffer_size size;", Default: "1k",
			Doc: "Buffer first used for a request head; larger heads move to large_client_header_buffers."},
		{Name: "large_client_header_buffers", Contexts: hs, Args: conf.Args2, Set: setLargeHeaderBuffers,
			Syntax: "large_client_header_buffers number size;", Default: "4 8k",
			Doc: "A request line longer than size gets 414, a header line longer than size 400, a head larger than number×size 400."},
		{Name: "absolute_redirect", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.AbsoluteRedirect }, bitAbsoluteRedirect),
			Syntax: "absolute_redirect on | off;", Default: "on",
			Doc: "A Location the server makes itself (a folder's 301, return and error_page with a path, index and try_files redirects) that starts with \"/\" is sent absolute: scheme, host and port before the path. Off: as it is."},
		{Name: "port_in_redirect", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.PortInRedirect }, bitPortInRedirect),
			Syntax: "port_in_redirect on | off;", Default: "on",
			Doc: "An absolute Location carries the port the client connected to (unless it is the scheme's 80 or 443). Off: never."},
		{Name: "server_name_in_redirect", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ServerNameInRedirect }, bitServerNameInRedirect),
			Syntax: "server_name_in_redirect on | off;", Default: "off",
			Doc: "The host of an absolute Location is the server's first server_name; off: the request's Host (without its port), else the address the client connected to."},
		{Name: "ignore_invalid_headers", Contexts: hs, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.IgnoreInvalidHeaders }, bitIgnoreInvalid),
			Syntax: "ignore_invalid_headers on | off;", Default: "on",
			Doc: "Drops request header fields whose names hold anything but letters, digits and hyphens (and underscores with underscores_in_headers on); they are neither passed upstream nor seen by $http_ variables. Names that are not HTTP tokens are 400 either way. As in nginx, fields before Host follow the address's default server, the rest the server Host selects."},
		{Name: "limit_except", Contexts: conf.LocationCtx, Args: conf.Args1More, Block: true, Set: setLimitExcept,
			Syntax: "limit_except method ... { ... }",
			Doc:    "The block's allow, deny, auth_basic, auth_basic_user_file and proxy_pass apply to requests whose method is not listed (GET implies HEAD; methods: GET HEAD POST PUT DELETE MKCOL COPY MOVE OPTIONS PROPFIND PROPPATCH LOCK UNLOCK PATCH). The block is an implicit location, inheriting the rest from its location; nested locations do not inherit it (as nginx)."},
		{Name: "internal", Contexts: conf.LocationCtx, Args: conf.Args0, Set: setInternal,
			Syntax: "internal;",
			Doc:    "The location (and those nested in it) serves only internal requests (index, try_files, error_page and X-Accel-Redirect redirects, subrequests such as auth_request's); a client asking for it gets 404."},
		{Name: "satisfy", Contexts: hsl, Args: conf.Args1, Set: setSatisfy,
			Syntax: "satisfy all | any;", Default: "all",
			Doc: "How the access phase's checks (allow/deny, auth_basic, auth_request) combine: all must allow, or any one allowing is enough (then the answer, when none allows, is 401 if one asked for credentials, else 403)."},
		{Name: "underscores_in_headers", Contexts: hs, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.UnderscoresInHeaders }, bitUnderscores),
			Syntax: "underscores_in_headers on | off;", Default: "off",
			Doc: "Keeps request header fields with underscores in their names. Off, a client's X_Forwarded_For cannot pose as X-Forwarded-For to a CGI or WSGI upstream, which maps both to HTTP_X_FORWARDED_FOR."},
		{Name: "merge_slashes", Contexts: hs, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.MergeSlashes }, bitMergeSlashes),
			Syntax: "merge_slashes on | off;", Default: "on",
			Doc: "Merges runs of slashes in the request's path (as $uri and locations see it); off keeps them, \"..\" then climbing back over one slash only."},
		{Name: "chunked_transfer_encoding", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ChunkedEncoding }, bitChunkedEncoding),
			Syntax: "chunked_transfer_encoding on | off;", Default: "on",
			Doc: "Off, a response of unknown length to an HTTP/1.1 client is sent until the connection closes instead of chunked."},
		{Name: "keepalive_disable", Contexts: hsl, Args: conf.Args1More, Set: setKeepaliveDisable,
			Syntax: "keepalive_disable none | browser ...;", Default: "msie6",
			Doc: "No keep-alive for these browsers, told by User-Agent as nginx tells them: msie6 (MSIE 4 and 5, and 6 without SV1, on POST requests) and safari (Safari on macOS)."},
		{Name: "reset_timedout_connection", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ResetTimedout }, bitResetTimedout),
			Syntax: "reset_timedout_connection on | off;", Default: "off",
			Doc: "A connection closed on a timeout during a request (its head, its body, or send_timeout) is reset (SO_LINGER 0, an RST) so that what it still holds in the kernel is freed at once; as nginx, not an idle keep-alive connection."},
		{Name: "postpone_output", Contexts: hsl, Args: conf.Args1, Set: setPostponeOutput, NoEffect: true,
			Syntax: "postpone_output size;", Default: "1460",
			Doc: "nginx holds back body bytes until this many are ready; numaproxy writes what a handler passes on at once, the head together with the first body bytes, so there is nothing to hold back."},
		{Name: "limit_rate", Contexts: hsl, Args: conf.Args1, Set: setRateTemplate(func(c *LocConf) **Template { return &c.LimitRate }, bitLimitRate),
			Syntax: "limit_rate rate;", Default: "0",
			Doc: "Bytes per second a response goes out at (a size, or variables that make one; 0: no limit), counted from the response's start with one second's worth in advance, as nginx. An upstream's X-Accel-Limit-Rate overrides it for its response."},
		{Name: "limit_rate_after", Contexts: hsl, Args: conf.Args1, Set: setRateTemplate(func(c *LocConf) **Template { return &c.LimitRateAfter }, bitLimitRateAfter),
			Syntax: "limit_rate_after size;", Default: "0",
			Doc: "Bytes of a response that go out before limit_rate applies (a size, or variables that make one)."},
		{Name: "fastcgi_temp_path", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3 | conf.Args4, Set: checkTempPath, NoEffect: true,
			Syntax: "fastcgi_temp_path path [level1 [level2 [level3]]];", Default: "fastcgi_temp",
			Doc: "numaproxy has no FastCGI module, so nothing is ever written there; the path and levels are checked."},
		{Name: "uwsgi_temp_path", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3 | conf.Args4, Set: checkTempPath, NoEffect: true,
			Syntax: "uwsgi_temp_path path [level1 [level2 [level3]]];", Default: "uwsgi_temp",
			Doc: "numaproxy has no uwsgi module, so nothing is ever written there; the path and levels are checked."},
		{Name: "scgi_temp_path", Contexts: hsl, Args: conf.Args1 | conf.Args2 | conf.Args3 | conf.Args4, Set: checkTempPath, NoEffect: true,
			Syntax: "scgi_temp_path path [level1 [level2 [level3]]];", Default: "scgi_temp",
			Doc: "numaproxy has no SCGI module, so nothing is ever written there; the path and levels are checked."},
	}
}

// LocConf holds the core's directives at one level, after inheritance.
type LocConf struct {
	ClientMaxBodySize   int64
	ClientHeaderTimeout time.Duration
	ClientBodyTimeout   time.Duration
	SendTimeout         time.Duration // send_timeout
	KeepaliveTimeout    time.Duration
	KeepaliveHeader     time.Duration // keepalive_timeout's second value; 0: no Keep-Alive header
	KeepaliveRequests   int
	LingeringClose      LingeringClose
	LingeringTime       time.Duration
	LingeringTimeout    time.Duration
	ServerTokens        bool
	ErrorPages          []ErrorPage
	RecursiveErrorPages bool

	ClientHeaderBufferSize int
	LargeHeaderBuffers     int
	LargeHeaderBufferSize  int

	ClientBodyBufferSize int
	ClientBodyTemp       *TempPath // never nil once the config is checked
	ClientBodyInFileOnly uint8     // BodyInFileOff, BodyInFileOn, BodyInFileClean
	ClientBodyInSingle   bool      // client_body_in_single_buffer (the memory part is one buffer always)
	IgnoreInvalidHeaders bool
	UnderscoresInHeaders bool
	MergeSlashes         bool
	ChunkedEncoding      bool            // chunked_transfer_encoding
	KeepaliveDisable     KeepaliveBrowse // keepalive_disable
	ResetTimedout        bool            // reset_timedout_connection
	LimitRate            *Template       // nil: no limit_rate
	LimitRateAfter       *Template       // nil: 0
	SatisfyAny           bool            // satisfy any

	AbsoluteRedirect     bool
	PortInRedirect       bool
	ServerNameInRedirect bool

	// handler is the location's content handler, set by the module whose directive
	// the location carries (nginx's clcf->handler); not inherited.
	handler Handler
	// autoRedirect: a request for the location's path without its final "/" gets a
	// 301 to it (nginx's clcf->auto_redirect, set by proxy_pass); not inherited.
	autoRedirect bool

	// internal: only internal requests may use the location (inherited, as
	// nginx merges it).
	internal bool

	// limitExcept is the methods a limit_except block limits (methodBits), and
	// limitLoc its location; not inherited (nginx's merge leaves them).
	limitExcept uint16
	limitLoc    *conf.Location
	// mods is what works at this level (filters, modules left out), set by the
	// first snapshot made of the configuration (NewSnapshot, setLevels).
	mods *levelModules

	// nameRulesVary: on some address of this server, servers drop different field
	// names, so the rules follow Host while a head is read (check sets it).
	nameRulesVary bool

	set uint64 // which fields this level set itself (bit* below)
}

// Bits of LocConf.set, one per directive, for nginx's "inherit unless set here".
const (
	bitClientMaxBody = 1 << iota
	bitClientHeaderTimeout
	bitClientBodyTimeout
	bitSendTimeout
	bitKeepaliveTimeout
	bitKeepaliveRequests
	bitServerTokens
	bitErrorPages
	bitClientHeaderBuffer
	bitLargeHeaderBuffers
	bitLingeringClose
	bitLingeringTime
	bitLingeringTimeout
	bitClientBodyBuffer
	bitClientBodyTemp
	bitIgnoreInvalid
	bitUnderscores
	bitRecursiveErrorPages
	bitMergeSlashes
	bitChunkedEncoding
	bitKeepaliveDisable
	bitResetTimedout
	bitLimitRate
	bitLimitRateAfter
	bitSatisfy
	bitAbsoluteRedirect
	bitPortInRedirect
	bitServerNameInRedirect
	bitInternal
	bitLimitExcept
	bitClientBodyInFile
	bitClientBodyInSingle
)

// KeepaliveBrowse is keepalive_disable's set of browsers.
type KeepaliveBrowse uint8

const (
	KeepaliveDisableMSIE6 KeepaliveBrowse = 1 << iota
	KeepaliveDisableSafari
)

// LingeringClose is lingering_close's value.
type LingeringClose uint8

const (
	LingeringOn LingeringClose = iota // nginx's default
	LingeringOff
	LingeringAlways
)

// ErrorPage is one error_page code→target mapping.
type ErrorPage struct {
	Code   int
	Status int    // the status to answer with: 0 keeps the original; -1 ("=") takes the target's
	Target string // "/uri", "@name" or an absolute URL
	// URI is Target with variables, evaluated for each error: what it gives decides
	// between a URI, a named location and a redirect, as in nginx. Nil: none.
	URI *Template
	Pos conf.Pos
}

// TempPath is a temporary files path: client_body_temp_path, proxy_temp_path.
type TempPath struct {
	Dir    string // absolute
	Levels []int  // as written; unused (see the directive)
	Pos    conf.Pos
}

// defaults is the http-level config before any directive: nginx's defaults.
func defaults() LocConf {
	return LocConf{
		ClientMaxBodySize:      1 << 20,
		ClientHeaderTimeout:    60 * time.Second,
		ClientBodyTimeout:      60 * time.Second,
		SendTimeout:            60 * time.Second,
		KeepaliveTimeout:       75 * time.Second,
		KeepaliveRequests:      1000,
		LingeringClose:         LingeringOn,
		LingeringTime:          30 * time.Second,
		LingeringTimeout:       5 * time.Second,
		ServerTokens:           true,
		ClientHeaderBufferSize: 1 << 10,
		LargeHeaderBuffers:     4,
		LargeHeaderBufferSize:  8 << 10,
		ClientBodyBufferSize:   2 * os.Getpagesize(), // nginx's two pages
		IgnoreInvalidHeaders:   true,
		MergeSlashes:           true,
		ChunkedEncoding:        true,
		KeepaliveDisable:       KeepaliveDisableMSIE6,
		AbsoluteRedirect:       true,
		PortInRedirect:         true,
	}
}

// inherit fills what this level did not set from its parent, nginx's merge (the
// http level from nginx's defaults first).
func (c *LocConf) inherit(parent *LocConf) error {
	conf.Inherit(c, parent, func(lc *LocConf) *uint64 { return &lc.set }, defaults, inheritedFields)
	return nil
}

// inheritedFields copies each directive's value from the parent level when this level
// did not set it.
var inheritedFields = []conf.Inherited[LocConf]{
	{Bit: bitClientMaxBody, Take: func(c, p *LocConf) { c.ClientMaxBodySize = p.ClientMaxBodySize }},
	{Bit: bitClientHeaderTimeout, Take: func(c, p *LocConf) { c.ClientHeaderTimeout = p.ClientHeaderTimeout }},
	{Bit: bitClientBodyTimeout, Take: func(c, p *LocConf) { c.ClientBodyTimeout = p.ClientBodyTimeout }},
	{Bit: bitSendTimeout, Take: func(c, p *LocConf) { c.SendTimeout = p.SendTimeout }},
	{Bit: bitKeepaliveTimeout, Take: func(c, p *LocConf) { c.KeepaliveTimeout, c.KeepaliveHeader = p.KeepaliveTimeout, p.KeepaliveHeader }},
	{Bit: bitKeepaliveRequests, Take: func(c, p *LocConf) { c.KeepaliveRequests = p.KeepaliveRequests }},
	{Bit: bitLingeringClose, Take: func(c, p *LocConf) { c.LingeringClose = p.LingeringClose }},
	{Bit: bitLingeringTime, Take: func(c, p *LocConf) { c.LingeringTime = p.LingeringTime }},
	{Bit: bitLingeringTimeout, Take: func(c, p *LocConf) { c.LingeringTimeout = p.LingeringTimeout }},
	{Bit: bitServerTokens, Take: func(c, p *LocConf) { c.ServerTokens = p.ServerTokens }},
	{Bit: bitErrorPages, Take: func(c, p *LocConf) { c.ErrorPages = p.ErrorPages }},
	{Bit: bitRecursiveErrorPages, Take: func(c, p *LocConf) { c.RecursiveErrorPages = p.RecursiveErrorPages }},
	{Bit: bitClientHeaderBuffer, Take: func(c, p *LocConf) { c.ClientHeaderBufferSize = p.ClientHeaderBufferSize }},
	{Bit: bitLargeHeaderBuffers, Take: func(c, p *LocConf) {
		c.LargeHeaderBuffers, c.LargeHeaderBufferSize = p.LargeHeaderBuffers, p.LargeHeaderBufferSize
	}},
	{Bit: bitClientBodyBuffer, Take: func(c, p *LocConf) { c.ClientBodyBufferSize = p.ClientBodyBufferSize }},
	{Bit: bitClientBodyTemp, Take: func(c, p *LocConf) { c.ClientBodyTemp = p.ClientBodyTemp }},
	{Bit: bitClientBodyInFile, Take: func(c, p *LocConf) { c.ClientBodyInFileOnly = p.ClientBodyInFileOnly }},
	{Bit: bitClientBodyInSingle, Take: func(c, p *LocConf) { c.ClientBodyInSingle = p.ClientBodyInSingle }},
	{Bit: bitIgnoreInvalid, Take: func(c, p *LocConf) { c.IgnoreInvalidHeaders = p.IgnoreInvalidHeaders }},
	{Bit: bitUnderscores, Take: func(c, p *LocConf) { c.UnderscoresInHeaders = p.UnderscoresInHeaders }},
	{Bit: bitMergeSlashes, Take: func(c, p *LocConf) { c.MergeSlashes = p.MergeSlashes }},
	{Bit: bitChunkedEncoding, Take: func(c, p *LocConf) { c.ChunkedEncoding = p.ChunkedEncoding }},
	{Bit: bitKeepaliveDisable, Take: func(c, p *LocConf) { c.KeepaliveDisable = p.KeepaliveDisable }},
	{Bit: bitResetTimedout, Take: func(c, p *LocConf) { c.ResetTimedout = p.ResetTimedout }},
	{Bit: bitLimitRate, Take: func(c, p *LocConf) { c.LimitRate = p.LimitRate }},
	{Bit: bitLimitRateAfter, Take: func(c, p *LocConf) { c.LimitRateAfter = p.LimitRateAfter }},
	{Bit: bitSatisfy, Take: func(c, p *LocConf) { c.SatisfyAny = p.SatisfyAny }},
	{Bit: bitInternal, Take: func(c, p *LocConf) { c.internal = p.internal }},
	{Bit: bitAbsoluteRedirect, Take: func(c, p *LocConf) { c.AbsoluteRedirect = p.AbsoluteRedirect }},
	{Bit: bitPortInRedirect, Take: func(c, p *LocConf) { c.PortInRedirect = p.PortInRedirect }},
	{Bit: bitServerNameInRedirect, Take: func(c, p *LocConf) { c.ServerNameInRedirect = p.ServerNameInRedirect }},
}

// HTTPConf is the core's config of the http block.
func HTTPConf(h *conf.HTTP) *LocConf { return h.Conf(Module).(*LocConf) }

// ServerConf is a server's merged core config.
func ServerConf(srv *conf.Server) *LocConf { return srv.Conf(Module).(*LocConf) }

// LocationConf is a location's merged core config.
func LocationConf(loc *conf.Location) *LocConf { return loc.Conf(Module).(*LocConf) }

// HasErrorPage reports an error_page for code.
func (lc *LocConf) HasErrorPage(code int) bool {
	for i := range lc.ErrorPages {
		if lc.ErrorPages[i].Code == code {
			return true
		}
	}
	return false
}

// NameRules are the field name rules of a server-level config.
func (lc *LocConf) NameRules() http1.NameRules {
	return http1.NameRules{IgnoreInvalid: lc.IgnoreInvalidHeaders, AllowUnderscores: lc.UnderscoresInHeaders}
}

// Limits are the head limits of large_client_header_buffers.
func (lc *LocConf) Limits() http1.Limits {
	return http1.Limits{MaxLineSize: lc.LargeHeaderBufferSize, MaxHeadSize: lc.LargeHeaderBuffers * lc.LargeHeaderBufferSize, MaxHeaders: http1.MaxHeaderFields}
}

func locConf(c *conf.Cursor) *LocConf { return c.HTTPConf().(*LocConf) }

// SetContentHandler makes h the content handler of the location being configured,
// as nginx's proxy_pass sets clcf->handler: the module whose directive the location
// carries calls it from that directive's Set function. autoRedirect asks for nginx's
// 301 from "/dir" to a location "/dir/". A location has one content handler: a second
// directive that sets one is an error.
func SetContentHandler(c *conf.Cursor, s *conf.Stmt, h Handler, autoRedirect bool) error {
	lc := c.HTTPConfOf(Module).(*LocConf)
	if lc.handler != nil {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	lc.handler, lc.autoRedirect = h, autoRedirect
	return nil
}

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

func setInternal(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitInternal != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	lc.internal = true
	lc.set |= bitInternal
	return nil
}

// Internal reports a location that serves internal requests only.
func (lc *LocConf) Internal() bool { return lc.internal }

func setSatisfy(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	switch strings.ToLower(s.Args[0].Value) { // nginx's enum values ignore case
	case "all":
		lc.SatisfyAny = false
	case "any":
		lc.SatisfyAny = true
	default:
		return s.InvalidValue(s.Args[0], `it must be "all" or "any"`)
	}
	lc.set |= bitSatisfy
	return nil
}

func setLingeringClose(c *conf.Cursor, s *conf.Stmt) error {
	var v LingeringClose
	switch strings.ToLower(s.Args[0].Value) { // nginx's enum values ignore case
	case "on":
		v = LingeringOn
	case "off":
		v = LingeringOff
	case "always":
		v = LingeringAlways
	default:
		return s.InvalidValue(s.Args[0], "")
	}
	lc := locConf(c)
	lc.LingeringClose = v
	lc.set |= bitLingeringClose
	return nil
}

func setKeepaliveTimeout(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	d, err := conf.ParseTime(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	lc.KeepaliveTimeout, lc.KeepaliveHeader = d, 0
	if len(s.Args) == 2 {
		h, err := conf.ParseTime(s.Args[1].Value)
		if err != nil {
			return s.InvalidValue(s.Args[1], "")
		}
		lc.KeepaliveHeader = h
	}
	lc.set |= bitKeepaliveTimeout
	return nil
}

func setErrorPage(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitErrorPages == 0 {
		lc.ErrorPages = nil
		lc.set |= bitErrorPages
	}
	args := s.Args
	target := args[len(args)-1].Value
	args = args[:len(args)-1]
	status := 0
	if last := args[len(args)-1].Value; strings.HasPrefix(last, "=") {
		status = -1
		if len(last) > 1 {
			n, err := strconv.Atoi(last[1:])
			if err != nil || n < 100 || n > 999 {
				return s.InvalidValue(args[len(args)-1], "")
			}
			status = n
		}
		args = args[:len(args)-1]
	}
	if len(args) == 0 {
		return s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	var uri *Template
	if strings.IndexByte(target, '$') >= 0 {
		t, err := CompileTemplate(c, target)
		if err != nil {
			return s.Errorf("%v", err)
		}
		if !t.Static() {
			uri = t
		}
	}
	for _, a := range args {
		code, err := strconv.Atoi(a.Value)
		if err != nil || code < 300 || code > 599 {
			return s.InvalidValue(a, "value must be between 300 and 599")
		}
		lc.ErrorPages = append(lc.ErrorPages, ErrorPage{Code: code, Status: status, Target: target, URI: uri, Pos: s.Pos})
	}
	return nil
}

// setKeepaliveDisable: "none" alone, or browsers (nginx's bitmask slot).
func setKeepaliveDisable(c *conf.Cursor, s *conf.Stmt) error {
	var v KeepaliveBrowse
	for _, a := range s.Args {
		switch a.Value {
		case "none":
			if len(s.Args) > 1 {
				return s.InvalidValue(a, "")
			}
		case "msie6":
			v |= KeepaliveDisableMSIE6
		case "safari":
			v |= KeepaliveDisableSafari
		default:
			return s.InvalidValue(a, "")
		}
	}
	lc := locConf(c)
	lc.KeepaliveDisable = v
	lc.set |= bitKeepaliveDisable
	return nil
}

// setRateTemplate reads a size that may be built from variables (nginx's
// ngx_http_set_complex_value_size_slot); a constant is checked here, and "0" is no
// template at all.
func setRateTemplate(field func(*LocConf) **Template, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		t, err := CompileTemplate(c, s.Args[0].Value)
		if err != nil {
			return s.Errorf("%v", err)
		}
		if t.Uses("limit_rate") {
			return s.InvalidValue(s.Args[0], "$limit_rate is this directive's own value")
		}
		if t.Static() {
			n, err := conf.ParseSize(s.Args[0].Value)
			if err != nil {
				return s.InvalidValue(s.Args[0], "")
			}
			if n == 0 {
				t = nil
			}
		}
		lc := locConf(c)
		*field(lc) = t
		lc.set |= bit
		return nil
	}
}

// setPostponeOutput checks the size (see the directive: no effect).
func setPostponeOutput(_ *conf.Cursor, s *conf.Stmt) error {
	if _, err := conf.ParseSize(s.Args[0].Value); err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	return nil
}

func setLargeHeaderBuffers(c *conf.Cursor, s *conf.Stmt) error {
	n, err := conf.ParseNumber(s.Args[0].Value)
	if err != nil || n < 1 {
		return s.InvalidValue(s.Args[0], "")
	}
	size, err := conf.ParseSize(s.Args[1].Value)
	if err != nil || size < 128 || size > 1<<20 {
		return s.InvalidValue(s.Args[1], "")
	}
	lc := locConf(c)
	lc.LargeHeaderBuffers, lc.LargeHeaderBufferSize = n, int(size)
	lc.set |= bitLargeHeaderBuffers
	return nil
}

func setClientBodyTempPath(c *conf.Cursor, s *conf.Stmt) error {
	p, err := ParseTempPath(c, s)
	if err != nil {
		return err
	}
	lc := locConf(c)
	lc.ClientBodyTemp = p
	lc.set |= bitClientBodyTemp
	return nil
}

func setClientBodyInFileOnly(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	switch s.Args[0].Value {
	case "off":
		lc.ClientBodyInFileOnly = BodyInFileOff
	case "on":
		lc.ClientBodyInFileOnly = BodyInFileOn
	case "clean":
		lc.ClientBodyInFileOnly = BodyInFileClean
	default:
		return s.InvalidValue(s.Args[0], `it must be "on", "clean" or "off"`)
	}
	lc.set |= bitClientBodyInFile
	return nil
}

// checkTempPath checks a temporary path of a module numaproxy does not have.
func checkTempPath(c *conf.Cursor, s *conf.Stmt) error {
	_, err := ParseTempPath(c, s)
	return err
}

// ParseTempPath reads nginx's path slot (client_body_temp_path, proxy_temp_path):
// a directory, relative to the prefix, and up to three levels of 1 or more digits
// each, 10 in all.
func ParseTempPath(c *conf.Cursor, s *conf.Stmt) (*TempPath, error) {
	dir := strings.TrimSuffix(s.Args[0].Value, "/")
	if dir == "" {
		dir = "/"
	}
	p := &TempPath{Dir: c.Path(dir), Pos: s.Pos}
	sum := 0
	for _, a := range s.Args[1:] {
		n, err := strconv.Atoi(a.Value)
		if err != nil || n < 1 {
			return nil, s.InvalidValue(a, "")
		}
		sum += n
		p.Levels = append(p.Levels, n)
	}
	if sum > 10 {
		return nil, s.InvalidValue(s.Args[len(s.Args)-1], "the levels take more than 10 digits")
	}
	return p, nil
}

// check gives the levels that did not set client_body_temp_path nginx's default, in
// the prefix, and marks the servers whose field name rules vary with Host.
func check(cfg *conf.Config, self *conf.Module) error {
	if cfg.HTTP == nil {
		return nil
	}
	temp := &TempPath{Dir: filepath.Join(cfg.Prefix, "client_body_temp")}
	defaultTemp := func(lc *LocConf) {
		if lc.ClientBodyTemp == nil {
			lc.ClientBodyTemp = temp
		}
	}
	defaultTemp(cfg.HTTP.Conf(self).(*LocConf))
	var walk func(locs []*conf.Location)
	walk = func(locs []*conf.Location) {
		for _, loc := range locs {
			defaultTemp(loc.Conf(self).(*LocConf))
			walk(loc.Locations)
		}
	}
	for _, srv := range cfg.HTTP.Servers {
		defaultTemp(srv.Conf(self).(*LocConf))
		walk(srv.Locations)
	}
	markNameRulesVary(cfg, self)
	inheritIfHandlers(cfg.HTTP.Servers, self)
	return declaredVars(cfg)
}

// inheritIfHandlers gives an if block's location without a content handler of its
// own its enclosing location's: nginx keeps the request's content handler when the
// if's location has none (ngx_http_update_location_config).
func inheritIfHandlers(servers []*conf.Server, self *conf.Module) {
	var walk func(locs []*conf.Location)
	walk = func(locs []*conf.Location) {
		for _, loc := range locs {
			if lc := loc.Conf(self).(*LocConf); loc.Implicit() && lc.handler == nil {
				p := loc.Parent.Conf(self).(*LocConf)
				lc.handler, lc.autoRedirect = p.handler, p.autoRedirect
			}
			walk(loc.Locations)
		}
	}
	for _, srv := range servers {
		walk(srv.Locations)
	}
}

// markNameRulesVary flags the servers of every address whose servers do not all
// drop the same field names: there the parser asks which server Host selects.
func markNameRulesVary(cfg *conf.Config, self *conf.Module) {
	byAddr := map[netip.AddrPort][]*LocConf{}
	for _, srv := range cfg.HTTP.Servers {
		for _, l := range srv.Listens {
			byAddr[l.Addr] = append(byAddr[l.Addr], srv.Conf(self).(*LocConf))
		}
	}
	for _, confs := range byAddr {
		for _, lc := range confs {
			if lc.NameRules() != confs[0].NameRules() {
				for _, lc := range confs {
					lc.nameRulesVary = true
				}
				break
			}
		}
	}
}

// DefaultConf is a config with nginx's defaults, for a connection no server governs.
func DefaultConf() *LocConf {
	d := defaults()
	return &d
}
