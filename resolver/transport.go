package resolver

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/numaproxy/numaproxy/eventloop"
)

// transmit sends e's pending families to its current server; if that fails,
// once more to the next server at once (nginx 1.15.2, ticket #1511). A query that
// could not be sent waits for its resend or its timeout.
func (r *Resolver) transmit(e *entry) {
	if r.send(e) != nil && len(r.servers) > 1 {
		e.server = (e.server + 1) % len(r.servers)
		_ = r.send(e)
	}
}

func (r *Resolver) send(e *entry) error {
	srv := r.servers[e.server]
	var s *udpSock
	for f := range 2 {
		if !e.pending[f] {
			continue
		}
		if e.tcp[f] {
			if err := r.sendTCP(e, f, srv); err != nil {
				return err
			}
			continue
		}
		if s == nil {
			var err error
			if s, err = r.openUDP(e, srv); err != nil {
				return err
			}
		}
		if _, err := unix.Write(s.w.Fd(), e.query[f]); err != nil {
			s.close()
			return fmt.Errorf("resolver %s: send: %w", srv, err)
		}
		r.stats.Queries++
	}
	return nil
}

// udpSock is one query's UDP socket, connected to the server it was sent to: a
// new random source port per query, and the kernel drops datagrams from other
// addresses. An entry keeps the sockets of its resends open until it is answered,
// so a late answer from an earlier server still counts.
type udpSock struct {
	e      *entry
	w      *eventloop.FDWatch
	server netip.AddrPort
}

func (r *Resolver) openUDP(e *entry, srv netip.AddrPort) (*udpSock, error) {
	sa, family := sockaddr(srv)
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("resolver %s: socket: %w", srv, err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("resolver %s: connect: %w", srv, err)
	}
	s := &udpSock{e: e, server: srv}
	if s.w, err = r.loop.WatchFD(fd, s.readable); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("resolver %s: %w", srv, err)
	}
	e.socks = append(e.socks, s)
	return s, nil
}

// readable reads the socket's datagrams until none is left or the lookup ended.
func (s *udpSock) readable() {
	r := s.e.r
	for s.w.Fd() >= 0 {
		n, err := unix.Read(s.w.Fd(), r.rbuf)
		switch err {
		case nil:
			r.answer(s.e, r.rbuf[:n], false, s.server)
		case unix.EAGAIN, unix.EINTR:
			return
		default:
			// ECONNREFUSED and the like: nothing will come from this server on this
			// socket; as nginx, the query waits for its resend or timeout.
			s.close()
			return
		}
	}
}

// close closes s and forgets it.
func (s *udpSock) close() {
	_ = s.w.Close()
	e := s.e
	for i, o := range e.socks {
		if o == s {
			last := len(e.socks) - 1
			e.socks[i], e.socks[last] = e.socks[last], nil
			e.socks = e.socks[:last]
			break
		}
	}
}

func sockaddr(a netip.AddrPort) (unix.Sockaddr, int) {
	if a.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: a.Addr().As4(), Port: int(a.Port())}, unix.AF_INET
	}
	return &unix.SockaddrInet6{Addr: a.Addr().As16(), Port: int(a.Port())}, unix.AF_INET6
}

// tcpConn asks over TCP what came truncated over UDP, on a connection of the
// loop's own; queries and answers carry a two-byte length (RFC 1035 4.2.2).
type tcpConn struct {
	e      *entry // nil once the lookup ended
	conn   eventloop.Conn
	server netip.AddrPort
	buf    []byte
}

// sendTCP sends family f's query to srv over e's TCP connection, dialling it
// first if e has none to srv.
func (r *Resolver) sendTCP(e *entry, f int, srv netip.AddrPort) error {
	if tc := e.tc; tc != nil && tc.server != srv {
		e.tc, tc.e = nil, nil
		_ = tc.conn.Close()
	}
	if e.tc == nil {
		tc := &tcpConn{e: e, server: srv}
		c, err := r.loop.Dial(srv, tcpTimeout, tc, nil)
		if err != nil {
			return fmt.Errorf("resolver %s: %w", srv, err)
		}
		tc.conn, e.tc = c, tc
	}
	var n [2]byte
	binary.BigEndian.PutUint16(n[:], uint16(len(e.query[f])))
	if _, err := e.tc.conn.Writev([][]byte{n[:], e.query[f]}); err != nil {
		return fmt.Errorf("resolver %s: send: %w", srv, err)
	}
	r.stats.Queries++
	return nil
}

func (t *tcpConn) OnOpen(eventloop.Conn) {}

func (t *tcpConn) OnData(c eventloop.Conn, data []byte) {
	if t.e == nil {
		return
	}
	t.buf = append(t.buf, data...)
	off := 0
	for t.e != nil && len(t.buf)-off >= 2 {
		n := int(binary.BigEndian.Uint16(t.buf[off:]))
		if len(t.buf)-off < 2+n {
			break
		}
		e := t.e
		e.r.answer(e, t.buf[off+2:off+2+n], true, t.server)
		off += 2 + n
	}
	t.buf = t.buf[:copy(t.buf, t.buf[off:])]
}

func (t *tcpConn) OnWriteBlocked(eventloop.Conn) {}
func (t *tcpConn) OnWritable(eventloop.Conn)     {}
func (t *tcpConn) OnTimeout(c eventloop.Conn)    { _ = c.Close() }

// OnClose: the queries it carried wait for their resend or timeout.
func (t *tcpConn) OnClose(c eventloop.Conn, err error) {
	if t.e != nil && t.e.tc == t {
		t.e.tc = nil
	}
	t.e = nil
}
