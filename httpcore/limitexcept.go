package httpcore

import (
	"strings"

	"github.com/numaproxy/numaproxy/conf"
)

// limit_except, nginx's: "limit_except METHOD ... { ... }" in a location makes
// the block an implicit location (conf.LocLimitExcept) whose configs serve the
// requests whose method is not listed (GET implies HEAD); allow/deny and
// auth_basic (and proxy_pass) may stand in it. As nginx's
// ngx_http_update_location_config, the block's location becomes the request's as
// soon as its enclosing location is chosen (found, named, or an if's entered);
// nested locations do not inherit it.

// methodBits are the methods limit_except lists, as nginx's ngx_methods_names.
var methodBits = map[string]uint16{
	"GET": 1 << 0, "HEAD": 1 << 1, "POST": 1 << 2, "PUT": 1 << 3, "DELETE": 1 << 4, "MKCOL": 1 << 5,
	"COPY": 1 << 6, "MOVE": 1 << 7, "OPTIONS": 1 << 8, "PROPFIND": 1 << 9, "PROPPATCH": 1 << 10,
	"LOCK": 1 << 11, "UNLOCK": 1 << 12, "PATCH": 1 << 13,
}

// methodOther is every other method (TRACE, CONNECT, an unknown one): always limited.
const methodOther = 1 << 14

func methodBit(m []byte) uint16 {
	if b, ok := methodBits[string(m)]; ok { // no allocation: the map index converts in place
		return b
	}
	return methodOther
}

func setLimitExcept(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitLimitExcept != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	limited := ^uint16(0)
	for _, a := range s.Args {
		b, ok := methodBits[strings.ToUpper(a.Value)]
		if !ok {
			return s.Errorf("invalid method %q", a.Value)
		}
		limited &^= b
	}
	if limited&methodBits["GET"] == 0 {
		limited &^= methodBits["HEAD"]
	}
	loc, err := c.ParseLimitExcept(s)
	if err != nil {
		return err
	}
	lc.limitExcept, lc.limitLoc = limited, loc
	lc.set |= bitLimitExcept
	return nil
}

// limitExcept makes the limit_except block's location the request's when it
// limits the request's method.
func (c *conn) limitExcept() {
	lc := c.lcf
	if lc.limitLoc == nil {
		return
	}
	m := c.req.Method()
	if c.Request.AsGET() && string(m) != "HEAD" {
		m = methodGET // after an error_page redirect the request goes on as GET
	}
	if lc.limitExcept&methodBit(m) != 0 {
		c.loc, c.lcf = lc.limitLoc, LocationConf(lc.limitLoc)
	}
}

var methodGET = []byte("GET")
