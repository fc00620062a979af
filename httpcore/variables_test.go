package httpcore

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/numaproxy/numaproxy/eventloop"
)

// namingVars name the variable they are asked for; they test the template machinery
// alone (the real evaluation is tested through requests in the integration tests).
var namingVars = []Variable{
	{Name: "host", Get: func(dst []byte, _ *Request, _ string) []byte { return append(dst, "[host]"...) }},
	{Name: "http_", Prefix: true, Param: coreVariables[1].Param, Get: func(dst []byte, _ *Request, p string) []byte { return append(dst, "[http:"+p+"]"...) }},
	{Name: "arg_", Prefix: true, Get: func(dst []byte, _ *Request, p string) []byte { return append(dst, "[arg:"+p+"]"...) }},
	{Name: "proxy_add_x_forwarded_for", Get: func(dst []byte, _ *Request, _ string) []byte { return append(dst, "[proxy_add_x_forwarded_for]"...) }},
}

func TestTemplatesWithNamingVars(t *testing.T) {
	vars, err := NewVariables(namingVars)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"plain":                      "plain",
		"$host":                      "[host]",
		"${host}name":                "[host]name",
		"a$host-b":                   "a[host]-b",
		"$HOST":                      "[host]",
		"$http_user_agent":           "[http:user-agent]",
		"$arg_Page":                  "[arg:Page]",
		"cost: $ 5":                  "cost: $ 5",
		"end$":                       "end$",
		"$proxy_add_x_forwarded_for": "[proxy_add_x_forwarded_for]",
	}
	for in, want := range tests {
		tmpl, err := vars.Compile(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := string(tmpl.Append(nil, nil)); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"$nosuch", "${host", "$0", "${1}"} {
		if _, err := vars.Compile(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
	if _, err := NewVariables(namingVars, namingVars[:1]); err == nil {
		t.Error("a variable declared twice")
	}
	if tmpl := vars.MustCompile("$host $http_x"); !tmpl.Uses("host") || !tmpl.Uses("http_") || tmpl.Uses("arg_") || tmpl.Static() {
		t.Errorf("Uses/Static of %q", tmpl)
	}
}

// BenchmarkTemplate evaluates a template with several variables for a parsed request.
// $proxy_host and $proxy_add_x_forwarded_for, the proxy's, are stood in for here by
// variables that do the same work.
func BenchmarkTemplate(b *testing.B) {
	cfg := mustConf(b, "events {}\nhttp {\n server { listen 127.0.0.1:8080; server_name example.com; location / { } }\n}\n")
	snap, err := NewSnapshot(cfg)
	if err != nil {
		b.Fatal(err)
	}
	w := NewWorker(snap, slog.New(slog.NewTextHandler(io.Discard, nil)), 0)
	c := &conn{w: w, conn: addrConn{local: netip.MustParseAddrPort("127.0.0.1:8080"), remote: netip.MustParseAddrPort("192.0.2.7:51234")}, id: 7, requests: 3}
	c.Request = &Request{c: c, status: 200}
	c.in = []byte("GET /api/items?id=42&x=y HTTP/1.1\r\nHost: Example.com:8080\r\nUser-Agent: bench/1.0\r\nX-Forwarded-For: 203.0.113.1\r\nCookie: a=1; sid=abc\r\n\r\n")
	n, err := c.req.Parse(c.in)
	if err != nil {
		b.Fatal(err)
	}
	c.headLen = int32(n)
	c.srv = cfg.HTTP.Servers[0]
	c.srvConf = ServerConf(c.srv)
	c.loc = c.srv.Locations[0]
	c.lcf = LocationConf(c.loc)
	c.uriBuf = []byte("/api/items")
	standIns := []Variable{
		{Name: "proxy_host", Get: func(dst []byte, _ *Request, _ string) []byte { return append(dst, "app"...) }},
		{Name: "proxy_add_x_forwarded_for", Get: func(dst []byte, r *Request, _ string) []byte {
			h := &r.Head().Headers
			for i := h.Index("x-forwarded-for", 0); i >= 0; i = h.Index("x-forwarded-for", i+1) {
				dst = append(dst, h.Value(i)...)
				dst = append(dst, ", "...)
			}
			return r.RemoteAddr().Addr().AppendTo(dst)
		}},
	}
	vars, err := NewVariables(coreVariables, standIns)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := vars.MustCompile(`$remote_addr - $host "$request" $status $request_uri $uri?$args $arg_id $http_user_agent $cookie_sid $proxy_host $proxy_add_x_forwarded_for $connection $connection_requests $server_port`)
	dst := tmpl.Append(nil, c.Request)
	want := `192.0.2.7 - example.com "GET /api/items?id=42&x=y HTTP/1.1" 200 /api/items?id=42&x=y /api/items?id=42&x=y 42 bench/1.0 abc app 203.0.113.1, 192.0.2.7 7 3 8080`
	if string(dst) != want {
		b.Fatalf("got  %s\nwant %s", dst, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = tmpl.Append(dst[:0], c.Request)
	}
}

// addrConn answers the address methods the variables ask for; the benchmark
// sends nothing.
type addrConn struct {
	eventloop.Conn
	local, remote netip.AddrPort
}

func (a addrConn) LocalAddr() netip.AddrPort  { return a.local }
func (a addrConn) RemoteAddr() netip.AddrPort { return a.remote }
