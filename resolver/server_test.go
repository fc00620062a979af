package resolver

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// testServer is a small authoritative DNS server on loopback, UDP and TCP on one
// port, whose zone a test changes while the resolver runs.
type testServer struct {
	udp  *net.UDPConn
	tcp  *net.TCPListener
	addr netip.AddrPort

	mu     sync.Mutex
	zone   map[string][]record         // by lower-case name without the final dot
	rcodes map[string]dnsmessage.RCode // "name" or "name/AAAA"
	trunc  map[string]bool             // UDP answers come truncated, without records
	silent bool                        // never answers
	delay  time.Duration               // before each answer
	log    []seen
	// hook runs before each UDP answer, with the query and a way to send raw
	// datagrams to the client from the server's own socket.
	hook func(q seen, sendFromServer func([]byte))
}

type record struct {
	owner string // "" for the name asked
	typ   dnsmessage.Type
	ttl   uint32
	addr  netip.Addr
	cname string
}

type seen struct {
	name string
	typ  dnsmessage.Type
	id   uint16
	tcp  bool
	from netip.AddrPort
}

func a(ip string, ttl uint32) record {
	addr := netip.MustParseAddr(ip)
	typ := dnsmessage.TypeA
	if addr.Is6() {
		typ = dnsmessage.TypeAAAA
	}
	return record{typ: typ, ttl: ttl, addr: addr}
}

func cname(target string, ttl uint32) record {
	return record{typ: dnsmessage.TypeCNAME, ttl: ttl, cname: target}
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	s := &testServer{zone: map[string][]record{}, rcodes: map[string]dnsmessage.RCode{}, trunc: map[string]bool{}}
	// UDP and TCP must share the port: the resolver retries a truncated answer over
	// TCP to the address it asked over UDP.
	for try := 0; ; try++ {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			_ = u.Close()
			if try < 20 {
				continue
			}
			t.Fatal(err)
		}
		s.udp, s.tcp = u, l
		s.addr = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
		break
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.serveUDP() }()
	go func() { defer wg.Done(); s.serveTCP() }()
	t.Cleanup(func() {
		_ = s.udp.Close()
		_ = s.tcp.Close()
		wg.Wait()
	})
	return s
}

func (s *testServer) set(name string, rrs ...record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zone[name] = rrs
}

func (s *testServer) setRcode(key string, rc dnsmessage.RCode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rcodes[key] = rc
}

func (s *testServer) setSilent(v bool) { s.with(func() { s.silent = v }) }

// with changes the server's settings under its lock.
func (s *testServer) with(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

// queries returns the queries seen for name (all names if "").
func (s *testServer) queries(name string) []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []seen
	for _, q := range s.log {
		if name == "" || q.name == name {
			out = append(out, q)
		}
	}
	return out
}

func (s *testServer) serveUDP() {
	buf := make([]byte, 4096)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		q, ok := s.record(buf[:n], false, from)
		if !ok {
			continue
		}
		s.mu.Lock()
		silent, delay, hook := s.silent, s.delay, s.hook
		s.mu.Unlock()
		if silent {
			continue
		}
		if hook != nil {
			hook(q, func(b []byte) { _, _ = s.udp.WriteToUDPAddrPort(b, from) })
		}
		resp := s.respond(q, false)
		go func() {
			time.Sleep(delay)
			_, _ = s.udp.WriteToUDPAddrPort(resp, from)
		}()
	}
}

func (s *testServer) serveTCP() {
	for {
		c, err := s.tcp.AcceptTCP()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			from := c.RemoteAddr().(*net.TCPAddr).AddrPort()
			for {
				var n [2]byte
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return
				}
				msg := make([]byte, binary.BigEndian.Uint16(n[:]))
				if _, err := io.ReadFull(c, msg); err != nil {
					return
				}
				q, ok := s.record(msg, true, from)
				if !ok {
					return
				}
				resp := s.respond(q, true)
				out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
				if _, err := c.Write(append(out, resp...)); err != nil {
					return
				}
			}
		}()
	}
}

// record parses and logs a query.
func (s *testServer) record(msg []byte, tcp bool, from netip.AddrPort) (seen, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return seen{}, false
	}
	q, err := p.Question()
	if err != nil {
		return seen{}, false
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	sq := seen{name: name, typ: q.Type, id: h.ID, tcp: tcp, from: from}
	s.mu.Lock()
	s.log = append(s.log, sq)
	s.mu.Unlock()
	return sq, true
}

func (s *testServer) respond(q seen, tcp bool) []byte {
	s.mu.Lock()
	rrs := s.zone[q.name]
	rc, ok := s.rcodes[q.name+"/"+q.typ.String()[4:]]
	if !ok {
		rc = s.rcodes[q.name]
	}
	trunc := s.trunc[q.name] && !tcp
	s.mu.Unlock()
	if trunc {
		return buildAnswer(q.id, q.name, q.typ, 0, true, nil)
	}
	return buildAnswer(q.id, q.name, q.typ, rc, false, rrs)
}

// buildAnswer packs an answer to (name, typ) with the records of typ and the CNAMEs.
func buildAnswer(id uint16, name string, typ dnsmessage.Type, rc dnsmessage.RCode, trunc bool, rrs []record) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true, RecursionDesired: true,
		RecursionAvailable: true, Authoritative: true, RCode: rc, Truncated: trunc})
	b.EnableCompression()
	must(b.StartQuestions())
	must(b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: typ, Class: dnsmessage.ClassINET}))
	must(b.StartAnswers())
	for _, rr := range rrs {
		owner := rr.owner
		if owner == "" {
			owner = name
		}
		h := dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(owner + "."), Class: dnsmessage.ClassINET, TTL: rr.ttl}
		switch {
		case rr.typ == dnsmessage.TypeCNAME:
			must(b.CNAMEResource(h, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(rr.cname + ".")}))
		case rr.typ != typ:
		case typ == dnsmessage.TypeA:
			must(b.AResource(h, dnsmessage.AResource{A: rr.addr.As4()}))
		case typ == dnsmessage.TypeAAAA:
			must(b.AAAAResource(h, dnsmessage.AAAAResource{AAAA: rr.addr.As16()}))
		}
	}
	msg, err := b.Finish()
	must(err)
	return msg
}

func must(err error) {
	if err != nil && !errors.Is(err, dnsmessage.ErrSectionDone) {
		panic(err)
	}
}
