package resolver

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/net/dns/dnsmessage"
)

var qtypes = [2]dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA}

// maxChain bounds the CNAME chain taken from one answer.
const maxChain = 8

var errBothOff = errors.New(`"ipv4" and "ipv6" cannot both be "off"`)

// packQuery appends a standard query for name (a valid key: see setKey) to b, as
// nginx builds it: recursion desired, one question of class IN, no EDNS.
func packQuery(b []byte, id uint16, name string, qtype dnsmessage.Type) []byte {
	b = binary.BigEndian.AppendUint16(b, id)
	b = append(b, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // RD; QDCOUNT 1
	for len(name) > 0 {
		i := 0
		for i < len(name) && name[i] != '.' {
			i++
		}
		b = append(b, byte(i))
		b = append(b, name[:i]...)
		if i < len(name) {
			i++
		}
		name = name[i:]
	}
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(qtype))
	return binary.BigEndian.AppendUint16(b, uint16(dnsmessage.ClassINET))
}

// answer handles a DNS message that came for e from server, over TCP or UDP.
// Whatever does not answer one of e's pending questions is ignored.
func (r *Resolver) answer(e *entry, msg []byte, tcp bool, server netip.AddrPort) {
	if !e.inflight {
		return
	}
	p := &r.parser
	h, err := p.Start(msg)
	if err != nil || !h.Response || h.OpCode != 0 {
		r.stats.Ignored++
		return
	}
	f := -1
	for i := range 2 {
		if e.pending[i] && e.ids[i] == h.ID {
			f = i
		}
	}
	if f < 0 {
		r.stats.Ignored++
		return
	}
	q, err := p.Question()
	if err != nil || q.Type != qtypes[f] || q.Class != dnsmessage.ClassINET || !nameIs(&q.Name, e.name) {
		r.stats.Ignored++
		return
	}
	if _, err := p.Question(); err != dnsmessage.ErrSectionDone {
		r.stats.Ignored++ // nginx: "invalid number of questions in DNS response"
		return
	}
	if h.Truncated {
		if tcp || e.tcp[f] {
			r.stats.Ignored++
			return
		}
		e.tcp[f] = true
		r.stats.TCP++
		_ = r.sendTCP(e, f, server) // on failure: resend or timeout
		return
	}
	code := int(h.RCode)
	switch {
	case code == FormErr || code > Refused:
		r.stats.Ignored++ // nginx logs a "DNS error" and waits
		return
	case code != 0:
		if e.rcode == 0 {
			e.rcode = code
		}
	default:
		if !r.addresses(e, f, msg, &q.Name) {
			r.stats.Ignored++
			return
		}
	}
	e.pending[f] = false
	if !e.pending[famA] && !e.pending[famAAAA] {
		r.finish(e)
	}
}

// addresses takes family f's addresses from the answer section: those of the
// name asked, or of a CNAME chain that starts there. Without any it keeps the end
// of the chain as the CNAME to follow. It reports false for a malformed message.
func (r *Resolver) addresses(e *entry, f int, msg []byte, qname *dnsmessage.Name) bool {
	p := &r.parser
	ttl := uint32(0xffffffff)
	got := len(e.got[f])
	r.chain = append(r.chain[:0], *qname)
	// Usually one pass; another only when a CNAME came after a record it explains.
	for pass := 0; pass < maxChain; pass++ {
		if _, err := p.Start(msg); err != nil || p.SkipAllQuestions() != nil {
			return false
		}
		grew, missed := false, false
		for {
			h, err := p.AnswerHeader()
			if err == dnsmessage.ErrSectionDone {
				break
			}
			if err != nil {
				return false
			}
			if h.Class != dnsmessage.ClassINET || !r.inChain(&h.Name) {
				missed = missed || h.Class == dnsmessage.ClassINET
				if p.SkipAnswer() != nil {
					return false
				}
				continue
			}
			switch {
			case h.Type == dnsmessage.TypeCNAME:
				c, err := p.CNAMEResource()
				if err != nil {
					return false
				}
				if !r.inChain(&c.CNAME) && len(r.chain) < maxChain {
					r.chain = append(r.chain, c.CNAME)
					grew = grew || missed
				}
			case h.Type == qtypes[f] && f == famA:
				a, err := p.AResource()
				if err != nil {
					return false
				}
				e.got[f] = append(e.got[f], netip.AddrFrom4(a.A))
			case h.Type == qtypes[f]:
				a, err := p.AAAAResource()
				if err != nil {
					return false
				}
				e.got[f] = append(e.got[f], netip.AddrFrom16(a.AAAA))
			default:
				if p.SkipAnswer() != nil {
					return false
				}
				continue
			}
			ttl = min(ttl, recordTTL(h.TTL))
		}
		if !grew {
			break
		}
		e.got[f] = e.got[f][:got] // again, with the longer chain
		ttl = 0xffffffff
	}
	e.ttl = min(e.ttl, ttl)
	if len(e.got[f]) == got && len(r.chain) > 1 && e.gotCname == "" {
		e.gotCname = nameKey(&r.chain[len(r.chain)-1])
	}
	return true
}

func (r *Resolver) inChain(n *dnsmessage.Name) bool {
	for i := range r.chain {
		if equalFold(r.chain[i].Data[:r.chain[i].Length], n.Data[:n.Length]) {
			return true
		}
	}
	return false
}

// nameIs reports whether n (absolute, "example.com.") is key ("example.com"), in any case.
func nameIs(n *dnsmessage.Name, key string) bool {
	d := n.Data[:n.Length]
	return len(d) == len(key)+1 && d[len(key)] == '.' && equalFold(d[:len(key)], []byte(key))
}

// nameKey is n as a cache key: lower case, without the final dot.
func nameKey(n *dnsmessage.Name) string {
	d := n.Data[:n.Length]
	if len(d) > 1 && d[len(d)-1] == '.' {
		d = d[:len(d)-1]
	}
	b := make([]byte, len(d))
	for i, c := range d {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return string(b)
}

func equalFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// recordTTL reads a TTL as nginx does, as a signed number of which the negative
// ones are 0 (RFC 2181 8 says a TTL above 2^31-1 is 0).
func recordTTL(t uint32) uint32 {
	if t > 0x7fffffff {
		return 0
	}
	return t
}
