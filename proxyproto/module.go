package proxyproto

import (
	"net/netip"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module is the HTTP side of "listen ... proxy_protocol": nginx's
// $proxy_protocol_addr, $proxy_protocol_port, $proxy_protocol_server_addr and
// $proxy_protocol_server_port, and proxy_protocol_timeout. The listen parameter
// itself is conf's, the layer that reads the header is put on each loop by
// server/.
var Module = &conf.Module{
	Name:       "proxy_protocol",
	Directives: directives(),
	NewHTTP:    func() any { return &SrvConf{} },
	MergeHTTP: func(parent, child any) error {
		if c := child.(*SrvConf); c.Timeout == 0 {
			c.Timeout = parent.(*SrvConf).Timeout
		}
		return nil
	},
	Ctx: &httpcore.Hooks{Variables: []httpcore.Variable{
		addrVar("proxy_protocol_addr", VarAddr),
		addrVar("proxy_protocol_port", VarPort),
		addrVar("proxy_protocol_server_addr", VarServerAddr),
		addrVar("proxy_protocol_server_port", VarServerPort),
	}},
}

var self *conf.Module

func init() { self = Module }

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "proxy_protocol_timeout", Contexts: conf.HTTPCtx | conf.ServerCtx, Args: conf.Args1, Set: setTimeout,
			Syntax: "proxy_protocol_timeout time;",
			Doc:    "Bounds the wait for the PROXY protocol header of a connection on a proxy_protocol address, from the accept (the address's default server's). nginx has it in its stream module only; its http server waits client_header_timeout, which is the default here."},
	}
}

// SrvConf is a level's proxy_protocol_timeout (0: client_header_timeout's).
type SrvConf struct {
	Timeout time.Duration
}

func setTimeout(c *conf.Cursor, s *conf.Stmt) error {
	d, err := conf.ParseTime(s.Args[0].Value)
	if err != nil || d <= 0 {
		return s.InvalidValue(s.Args[0], "")
	}
	c.HTTPConf().(*SrvConf).Timeout = d
	return nil
}

// TimeoutOf is how long a connection to srv's addresses may take to send its
// header: proxy_protocol_timeout, else client_header_timeout.
func TimeoutOf(srv *conf.Server) time.Duration {
	if sc, _ := srv.Conf(self).(*SrvConf); sc != nil && sc.Timeout > 0 {
		return sc.Timeout
	}
	return httpcore.ServerConf(srv).ClientHeaderTimeout
}

func addrVar(name string, v Var) httpcore.Variable {
	return httpcore.Variable{Name: name, Get: func(dst []byte, r *httpcore.Request, _ string) []byte {
		dst, _ = HeaderOf(r.Conn()).AppendVar(dst, v)
		return dst
	}}
}

// SourceOf is the client address the request's connection's PROXY protocol
// header gives (nginx's $proxy_protocol_addr and _port, what realip's
// "real_ip_header proxy_protocol" takes), with ok false when there is no header
// or it carries no address (LOCAL, UNKNOWN, UNIX).
func SourceOf(r *httpcore.Request) (netip.AddrPort, bool) {
	h := HeaderOf(r.Conn())
	if h == nil || !h.addrs {
		return netip.AddrPort{}, false
	}
	return h.Source, true
}
