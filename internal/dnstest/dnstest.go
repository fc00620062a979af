// Package dnstest is an authoritative DNS server on loopback for tests, built on
// github.com/miekg/dns (a test dependency only: nothing outside tests imports
// this package). A test sets the answers for names and changes them while the
// code under test runs; the server counts the questions it gets.
package dnstest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server answers A and AAAA questions over UDP on 127.0.0.1.
type Server struct {
	srv  *dns.Server
	addr string

	mu      sync.Mutex
	records map[string]answer // by lower-case name without the final dot
	silent  bool
	asked   map[string]int
}

type answer struct {
	ttl   uint32
	addrs []netip.Addr
	rcode int
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{addr: pc.LocalAddr().String(), records: map[string]answer{}, asked: map[string]int{}}
	started := make(chan struct{})
	s.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(s.serve), NotifyStartedFunc: func() { close(started) }}
	go func() { _ = s.srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = s.srv.Shutdown() })
	return s
}

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// Set makes name resolve to addrs (IPv4 and IPv6 text) with ttl seconds.
func (s *Server) Set(name string, ttl uint32, addrs ...string) {
	a := answer{ttl: ttl}
	for _, t := range addrs {
		a.addrs = append(a.addrs, netip.MustParseAddr(t))
	}
	s.mu.Lock()
	s.records[key(name)] = a
	s.mu.Unlock()
}

// Fail makes questions for name answered with rcode (dns.RcodeNameError for
// NXDOMAIN, dns.RcodeServerFailure...).
func (s *Server) Fail(name string, rcode int) {
	s.mu.Lock()
	s.records[key(name)] = answer{rcode: rcode}
	s.mu.Unlock()
}

// Silent makes the server drop every question (on) or answer again (off).
func (s *Server) Silent(on bool) {
	s.mu.Lock()
	s.silent = on
	s.mu.Unlock()
}

// Asked is the number of questions (A and AAAA count one each) name got.
func (s *Server) Asked(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[key(name)]
}

func key(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 {
		return
	}
	q := req.Question[0]
	k := key(q.Name)
	s.mu.Lock()
	s.asked[k]++
	a, ok := s.records[k]
	silent := s.silent
	s.mu.Unlock()
	if silent {
		return
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
	case a.rcode != 0:
		m.Rcode = a.rcode
	default:
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: a.ttl}
		for _, ip := range a.addrs {
			switch {
			case q.Qtype == dns.TypeA && ip.Is4():
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip.AsSlice()})
			case q.Qtype == dns.TypeAAAA && ip.Is6():
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()})
			}
		}
	}
	_ = w.WriteMsg(m)
}
