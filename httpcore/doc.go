// Package httpcore is the HTTP core on the event loops, nginx's ngx_http_core_module
// and its request cycle: it owns the client connection and runs each request
// through phases whose handlers modules add, sends the response through filter
// chains modules extend, and keeps the registry of the variables modules declare.
// It knows no module by name: the binary lists them (cmd/numaproxy/modules.go, like
// nginx's ngx_modules[]) and each brings its directives, configs and Hooks.
//
// # The connection
//
// A Worker serves the client connections of one loop (it is the loop's
// eventloop.Handler): keep-alive, pipelining with bounded look-ahead, the timeouts
// (client_header_timeout, client_body_timeout, send_timeout, keepalive_timeout),
// request bodies streamed, read whole into memory and a temporary file, or dropped
// after an answer, and lingering close. A request's state (Request) comes from the
// worker when bytes arrive and goes back when the connection idles, so an idle
// connection holds no buffer. conn.go is the cycle, body.go and linger.go the body.
//
// # Phases
//
// A parsed request goes through nginx's phases in order (Phase): post-read, server
// rewrite (the server level's rewrite directives), find config (the core finds the
// location, checks client_max_body_size, answers "/dir" with a 301 to "/dir/" where
// the location asks for it; then module handlers may refuse it, as static's
// internal), rewrite, post-rewrite (back to find config when a rewrite changed
// $uri, Request.SetRewritten), preaccess, access, precontent, content, and log when
// the request ends. A module adds handlers to a phase in its
// Hooks.Init (Setup.AddHandler); each returns, as ngx_http_core_run_phases expects,
// Declined (the next handler), OK (the next phase), Done (it took the request and
// answers it itself), Again (it calls Request.RunPhases later) or an HTTP status,
// which the core answers with its page or the location's error_page. The content
// phase first runs the location's content handler, which the module whose
// directive the location carries set at configuration time (SetContentHandler:
// proxy_pass sets the proxy's), then the phase's handlers, then answers 404. An
// internal redirect (error_page, Request.InternalRedirect, Rerun) runs the phases
// again from the server rewrite phase (a named location from its rewrite phase), at
// most 10 times a request with the post-rewrite searches. An if block of a location
// is a location of its own (conf.LocIf) that Request.EnterIf makes the request's;
// when it has no content handler it takes its enclosing location's. A
// limit_except block is one too (conf.LocLimitExcept, limitexcept.go): it becomes
// the request's when its location is chosen and the method is one it limits.
//
// # Access
//
// The access phase's handlers (allow/deny, auth_basic, auth_request) are combined
// as nginx's access checker does, after the location's satisfy: with "all" each
// handler that allows (OK) lets the next one check and the first refusal is the
// answer; with "any" the first that allows ends the phase (a WWW-Authenticate an
// earlier one carried is dropped) and refusals are kept, a 401 over a 403, for a
// post-access step to answer when none allowed. A handler that waits returns Again
// and sets a Pending, so that the core tells it when the client goes. Subrequests
// skip the phase. The client address the handlers see is Request.RemoteAddr: the
// connection's peer unless a post-read handler (realip) gave the request another
// with SetRemoteAddr; PeerAddr stays the peer's.
//
// # Subrequests
//
// A module runs a location for a request with StartSubrequest (nginx's
// ngx_http_subrequest, for auth_request): a request of its own on a connection that
// is not a socket (subrequest.go), with the parent's head as GET and no body, its
// own URI, location, phases from the server rewrite phase (access skipped) and
// content handler, and every core path (error_page, internal redirects, a
// content handler's Pending) working as for a client's request. What it would
// send is dropped; SubrequestHooks.Header sees its response head while the
// content handler's variables are valid, Done its end. A client that closes
// cancels the subrequests of its request. A request that starts none pays
// nothing, and the subrequest connections are reused by the worker.
// StartBackground is nginx's background subrequest (proxy_cache_background_update):
// a clone of the request in its location, started at the content phase with a
// copy of the head, that belongs to no client connection, so it runs on the loop
// after the request and its connection are gone.
//
// # Filters
//
// A response goes out through two chains (header.go). The handler fills the head
// (Request.NewHeader: status, fields, the body's length or -1) and calls SendHeader;
// header filters change it, the last one is the core's writer: status line, Server,
// Date, the fields, the framing (Content-Length; chunked for HTTP/1.1 when the length
// is unknown, until the close for HTTP/1.0), Connection and Keep-Alive. The body goes
// through the body filters (SendBody, SendFile, Flush), the last of which writes to
// the connection: the head with the first body bytes in one system call, chunks
// encoded. A module puts a filter on top in its Init (Setup.AddHeaderFilter,
// AddBodyFilter) and calls the one that was on top before it, as nginx's
// ngx_http_top_header_filter. The core makes the chains once for each set of
// modules active at some level (Setup.ActiveWhere): a location whose
// configuration leaves a module idle does not pass its responses through it.
//
// # Variables
//
// Each module declares its variables by name with a function that appends the
// value (Hooks.Variables); "http_", "arg_", "cookie_" are families. A configuration
// also declares variables of its own (vars_declared.go, nginx's variables indexed
// at configuration time): set's, map's, geo's, split_clients' and the named groups
// of its regexes, each with a slot per request that holds its value once computed
// or set. Templates (CompileTemplate, from a directive's Set) compile against both,
// a name declared later in the file included (an unknown one is an error once the
// configuration is read), and evaluate only what they name, without allocating.
// $1 ... $9 are the captures of the request's last regex match (Request.Regex):
// location ~, server_name ~, rewrite, if, map. The core's variables are in
// vars_core.go.
//
// # Configuration
//
// The core's directives (module.go) live in a LocConf at every level, merged as
// nginx merges its loc_conf; every module keeps its own config the same way
// (conf.Module's NewHTTP and MergeHTTP), and reaches it for a request with
// Request.LocConf. A Snapshot compiles a configuration for the loops: routes, the
// modules' Init, the phase engine; a request keeps the snapshot it started with.
//
// # Writing a module
//
// A module is a package with a conf.Module: its directives, its config type and
// merge, and Ctx set to its Hooks. In Init it looks at the configuration and adds
// its phase handlers and filters only if some level uses it, so that a module
// nobody configured costs a request nothing. Per-loop state comes from
// Hooks.NewLoop (Worker.State), per-snapshot state from Setup.SetState
// (Snapshot.State), per-request state from Request.Ctx under the module's Key. A
// content handler that answers later registers a Pending (Request.SetPending,
// ReadBody): the core tells it of request body data, of the client's backpressure
// and of its end; it answers with NewHeader, SendHeader, SendBody and Finish, or
// Fail, Abort, SendStatus, InternalRedirect. A handler that answers at once uses
// SendPage, SendText or SendStatus and returns Done. A module that keeps figures
// for monitoring counts them per loop, and only while Snapshot.StatsEnabled (a
// module that reports them, as metrics, calls Setup.EnableStats). Add the module to
// cmd/numaproxy/modules.go. The rewrite and headers packages are small examples;
// proxy is the large one.
package httpcore
