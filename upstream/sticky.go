package upstream

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

// Sticky is NGINX Plus's "sticky cookie": the first response names the server
// that answered in a cookie, and later requests carrying it go to that server
// while it is available.
type Sticky struct {
	Cookie   string
	Expires  time.Duration // 0: a session cookie
	Max      bool          // expires=max
	Domain   string
	Path     string
	HTTPOnly bool
	Secure   bool
	SameSite string // "strict", "lax", "none" or ""
}

func setSticky(c *conf.Cursor, s *conf.Stmt) error {
	g := c.Block.(*Group)
	if g.Sticky != nil {
		return s.Errorf("\"sticky\" directive is duplicate")
	}
	switch s.Args[0].Value {
	case "cookie":
	case "route", "learn":
		return s.Errorf("\"sticky %s\" is not supported by numaproxy (only \"sticky cookie\")", s.Args[0].Value)
	default:
		return s.InvalidValue(s.Args[0], `it must be "cookie"`)
	}
	if len(s.Args) < 2 {
		return s.Errorf("no cookie name in \"sticky cookie\"")
	}
	st := &Sticky{Cookie: s.Args[1].Value}
	if st.Cookie == "" || strings.ContainsAny(st.Cookie, "=;, \t") {
		return s.InvalidValue(s.Args[1], "not a cookie name")
	}
	for _, a := range s.Args[2:] {
		k, v, hasVal := strings.Cut(a.Value, "=")
		switch {
		case hasVal && k == "expires":
			if v == "max" {
				st.Max = true
				continue
			}
			d, err := conf.ParseTime(v)
			if err != nil {
				return s.InvalidValue(a, "")
			}
			st.Expires = d
		case hasVal && k == "domain" && v != "":
			st.Domain = v
		case hasVal && k == "path" && v != "":
			st.Path = v
		case hasVal && k == "samesite" && (v == "strict" || v == "lax" || v == "none"):
			st.SameSite = v
		case !hasVal && k == "httponly":
			st.HTTPOnly = true
		case !hasVal && k == "secure":
			st.Secure = true
		default:
			return &conf.Error{Pos: a.Pos, Msg: fmt.Sprintf("invalid parameter %q", a.Value)}
		}
	}
	g.Sticky = st
	return nil
}

// AppendCookie appends the Set-Cookie value that binds a client to p.
func (st *Sticky) AppendCookie(dst []byte, p *Peer, now time.Time) []byte {
	dst = append(append(append(dst, st.Cookie...), '='), p.route...)
	switch {
	case st.Max:
		dst = append(dst, "; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000"...)
	case st.Expires > 0:
		dst = append(dst, "; expires="...)
		dst = now.Add(st.Expires).UTC().AppendFormat(dst, "Mon, 02-Jan-06 15:04:05 GMT")
		dst = append(dst, "; max-age="...)
		dst = strconv.AppendInt(dst, int64(st.Expires/time.Second), 10)
	}
	if st.Domain != "" {
		dst = append(append(dst, "; domain="...), st.Domain...)
	}
	if st.Path != "" {
		dst = append(append(dst, "; path="...), st.Path...)
	}
	if st.HTTPOnly {
		dst = append(dst, "; httponly"...)
	}
	if st.SameSite != "" {
		dst = append(append(dst, "; samesite="...), st.SameSite...)
	}
	if st.Secure {
		dst = append(dst, "; secure"...)
	}
	return dst
}

// Route is what the sticky cookie says of p: the server's route= if it has
// one, else, as NGINX Plus, the hexadecimal MD5 of its address ("ip:port", or
// the unix-domain socket's path).
func (p *Peer) Route() string { return p.route }

func (p *Peer) setRoute() {
	if p.RouteParam != "" {
		p.route = p.RouteParam
		return
	}
	text := p.Addr.String()
	if p.Unix != "" {
		text = p.Unix
	}
	sum := md5.Sum([]byte(text))
	p.route = hex.EncodeToString(sum[:])
}

// PeerByRoute is the peer a sticky cookie's value names, nil if none.
func (g *Group) PeerByRoute(v []byte) *Peer {
	if len(v) == 0 {
		return nil
	}
	for _, p := range g.Peers {
		if p.route == string(v) {
			return p
		}
	}
	for _, p := range g.Backup {
		if p.route == string(v) {
			return p
		}
	}
	return nil
}

// PickPeer takes p for a request, as Pick would have, if it may be tried now:
// a sticky cookie's server. It reports false when p is not available.
func (b *Balancer) PickPeer(p *Peer, now time.Time, tried *Tried) bool {
	if !b.g.owns(p) || !b.usable(p, now, tried) {
		return false
	}
	tried.set(p.index)
	b.conns[p.index]++
	p.picked(now)
	return true
}

// owns reports whether p is one of g's peers (and not of another version of it).
func (g *Group) owns(p *Peer) bool {
	i := p.index
	if i < len(g.Peers) {
		return g.Peers[i] == p
	}
	i -= len(g.Peers)
	return i < len(g.Backup) && g.Backup[i] == p
}
