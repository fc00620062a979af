package limit

import (
	"math"
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/errorlog"
)

func stmt(line string) *conf.Stmt {
	f := strings.Fields(line)
	pos := conf.Pos{File: "/etc/numaproxy/site.conf", Line: 5}
	s := &conf.Stmt{Name: f[0], Pos: pos}
	for _, a := range f[1:] {
		s.Args = append(s.Args, conf.Token{Value: a, Pos: pos})
	}
	return s
}

func TestParseZones(t *testing.T) {
	rz, err := ParseReqZone(stmt("limit_req_zone $binary_remote_addr zone=one:10m rate=30r/m"))
	if err != nil || rz.Key != "$binary_remote_addr" || rz.Name != "one" || rz.Size != 10<<20 || rz.Rate != 500 {
		t.Fatal(rz, err)
	}
	if rz, _ := ParseReqZone(stmt("limit_req_zone $k rate=5 zone=z:32768")); rz.Rate != 5000 || rz.Size != 32768 {
		t.Error("rate without a unit is per second; a size without a unit in bytes", rz)
	}
	if rz, _ := ParseReqZone(stmt("limit_req_zone $k zone=z:1M rate=1r/m")); rz.Rate != 16 || rz.Size != 1<<20 {
		t.Error(rz)
	}
	cz, err := ParseConnZone(stmt("limit_conn_zone $server_name zone=perserver:64K"))
	if err != nil || cz.Key != "$server_name" || cz.Name != "perserver" || cz.Size != 64<<10 {
		t.Fatal(cz, err)
	}
	// nginx 1.22's messages (nginx -t), but for sync, which it calls "invalid
	// number of arguments".
	for _, tc := range []struct{ line, err string }{
		{"limit_req_zone $k zone=z rate=1r/s", `invalid zone size "zone=z"`},
		{"limit_req_zone $k zone=z:1k rate=1r/s", `zone "zone=z:1k" is too small`},
		{"limit_req_zone $k zone=z:32767 rate=1r/s", `zone "zone=z:32767" is too small`},
		{"limit_req_zone $k zone=z:1g rate=1r/s", `invalid zone size "zone=z:1g"`},
		{"limit_req_zone $k zone=z:+1m rate=1r/s", `invalid zone size "zone=z:+1m"`},
		{"limit_req_zone $k zone=z:abc rate=1r/s", `invalid zone size "zone=z:abc"`},
		{"limit_req_zone $k zone=z:1m rate=0r/s", `invalid rate "rate=0r/s"`},
		{"limit_req_zone $k zone=z:1m rate=1r/h", `invalid rate "rate=1r/h"`},
		{"limit_req_zone $k zone=z:1m rate=r/s", `invalid rate "rate=r/s"`},
		{"limit_req_zone $k zone=z:1m rate=99999999999999999999r/s", `invalid rate "rate=99999999999999999999r/s"`},
		{"limit_req_zone $k zone=:1m rate=1r/s", `"limit_req_zone" must have "zone" parameter`},
		{"limit_req_zone $k rate=1r/s foo=1", `invalid parameter "foo=1"`},
		{"limit_req_zone $k rate=1r/s", `invalid number of arguments in "limit_req_zone" directive`},
		{"limit_req_zone $k zone=z:1m rate=1r/s sync", `the "sync" parameter of "limit_req_zone" is NGINX Plus's (zone state shared across a cluster); numaproxy does not have it`},
		{"limit_conn_zone $k zone=z", `invalid zone size "zone=z"`},
		{"limit_conn_zone $k zone=z:1k", `zone "zone=z:1k" is too small`},
		{"limit_conn_zone $k zone=:1m", `"limit_conn_zone" must have "zone" parameter`},
		{"limit_conn_zone $k rate=1", `invalid parameter "rate=1"`},
		{"limit_conn_zone $k zone=z:1m sync", `the "sync" parameter of "limit_conn_zone" is NGINX Plus's (zone state shared across a cluster); numaproxy does not have it`},
	} {
		var err error
		if strings.HasPrefix(tc.line, "limit_req") {
			_, err = ParseReqZone(stmt(tc.line))
		} else {
			_, err = ParseConnZone(stmt(tc.line))
		}
		if want := tc.err + " in /etc/numaproxy/site.conf:5"; err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.line, err, want)
		}
	}
}

func TestParseLimits(t *testing.T) {
	list, err := AddReqLimit(nil, stmt("limit_req zone=one burst=5"))
	if err != nil {
		t.Fatal(err)
	}
	list, err = AddReqLimit(list, stmt("limit_req zone=two burst=12 delay=8"))
	if err != nil {
		t.Fatal(err)
	}
	list, err = AddReqLimit(list, stmt("limit_req zone=three nodelay"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0] != (ReqLimitConfig{Zone: "one", Burst: 5000, Pos: list[0].Pos}) ||
		list[1].Burst != 12000 || list[1].Delay != 8000 || list[2].Burst != 0 || list[2].Delay != math.MaxUint64 {
		t.Fatal(list)
	}
	cl, err := AddConnLimit(nil, stmt("limit_conn addr 1"))
	if err != nil || len(cl) != 1 || cl[0].Zone != "addr" || cl[0].Conn != 1 {
		t.Fatal(cl, err)
	}
	for _, tc := range []struct{ line, err string }{
		{"limit_req zone=z burst=0", `invalid burst value "burst=0"`},
		{"limit_req zone=z burst=x", `invalid burst value "burst=x"`},
		{"limit_req zone=z burst=+1", `invalid burst value "burst=+1"`},
		{"limit_req zone=z burst=65536", `burst value "burst=65536" is over 65535, numaproxy's largest (nginx takes more)`},
		{"limit_req zone=z delay=0", `invalid delay value "delay=0"`},
		{"limit_req zone=z nodelay=1", `invalid parameter "nodelay=1"`},
		{"limit_req burst=1", `"limit_req" must have "zone" parameter`},
		{"limit_req zone=one", `"limit_req" directive is duplicate`},
		{"limit_conn z 0", `invalid number of connections "0"`},
		{"limit_conn z x", `invalid number of connections "x"`},
		{"limit_conn z 65536", `connection limit must be less 65536`},
		{"limit_conn addr 2", `"limit_conn" directive is duplicate`},
		{"limit_req_status 600", `value must be between 400 and 599`},
		{"limit_conn_status 399", `value must be between 400 and 599`},
		{"limit_req_status abc", `"limit_req_status" directive invalid number`},
		{"limit_req_log_level debug", `invalid value "debug"`},
		{"limit_conn_log_level crit", `invalid value "crit"`},
		{"limit_req_dry_run maybe", `invalid value "maybe" in "limit_req_dry_run" directive, it must be "on" or "off"`},
	} {
		var err error
		s := stmt(tc.line)
		switch s.Name {
		case "limit_req":
			_, err = AddReqLimit(list, s)
		case "limit_conn":
			_, err = AddConnLimit(cl, s)
		case "limit_req_status", "limit_conn_status":
			_, err = ParseStatus(s)
		case "limit_req_log_level", "limit_conn_log_level":
			_, err = ParseLogLevel(s)
		default:
			_, err = ParseDryRun(s)
		}
		if want := tc.err + " in /etc/numaproxy/site.conf:5"; err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.line, err, want)
		}
	}
	if n, err := ParseStatus(stmt("limit_req_status 429")); n != 429 || err != nil {
		t.Error(n, err)
	}
	if l, err := ParseLogLevel(stmt("limit_req_log_level notice")); l != errorlog.LevelNotice || err != nil {
		t.Error(l, err)
	}
	if on, err := ParseDryRun(stmt("limit_conn_dry_run on")); !on || err != nil {
		t.Error(on, err)
	}
}

func TestZones(t *testing.T) {
	var zs Zones
	rz, _ := ParseReqZone(stmt("limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s"))
	if err := zs.DeclareReq(rz); err != nil {
		t.Fatal(err)
	}
	cz, _ := ParseConnZone(stmt("limit_conn_zone $binary_remote_addr zone=c:1m"))
	if err := zs.DeclareConn(cz); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{zs.DeclareReq(rz), `limit_req_zone "z" is already bound to key "$binary_remote_addr"`},
		{zs.DeclareConn(ConnZoneConfig{Name: "z", Key: "$k", Size: 1 << 20, Pos: rz.Pos}), `the shared memory zone "z" is already declared for a different use`},
		{zs.DeclareConn(ConnZoneConfig{Name: "c", Key: "$k", Size: 2 << 20, Pos: rz.Pos}), `the size 2097152 of shared memory zone "c" conflicts with already declared size 1048576`},
	} {
		if want := tc.want + " in /etc/numaproxy/site.conf:5"; tc.err == nil || tc.err.Error() != want {
			t.Errorf("got %v\nwant %s", tc.err, want)
		}
	}
	if err := zs.Open(nil); err != nil {
		t.Fatal(err)
	}
	rl, _ := AddReqLimit(nil, stmt("limit_req zone=z burst=3"))
	if limits, err := zs.ReqLimits(rl); err != nil || limits[0].Zone != zs.Req["z"] || limits[0].Burst != 3000 {
		t.Fatal(limits, err)
	}
	for _, tc := range []struct {
		line, want string
	}{
		{"limit_req zone=y", `zero size shared memory zone "y"`},
		{"limit_req zone=c", `the shared memory zone "c" is already declared for a different use`},
		{"limit_conn z 1", `the shared memory zone "z" is already declared for a different use`},
		{"limit_conn y 1", `zero size shared memory zone "y"`},
	} {
		var err error
		if s := stmt(tc.line); s.Name == "limit_req" {
			l, _ := AddReqLimit(nil, s)
			_, err = zs.ReqLimits(l)
		} else {
			l, _ := AddConnLimit(nil, s)
			_, err = zs.ConnLimits(l)
		}
		if want := tc.want + " in /etc/numaproxy/site.conf:5"; err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", tc.line, err, want)
		}
	}
	// A reload keeps the states of a zone of the same name, kind and size.
	var next Zones
	next.DeclareReq(rz)
	if err := next.Open(&zs); err != nil || next.Req["z"].t != zs.Req["z"].t {
		t.Fatal(err)
	}
	var bad Zones
	rz.Key = "$remote_addr"
	bad.DeclareReq(rz)
	if err := bad.Open(&zs); err == nil || err.Error() != `limit_req "z" uses the "$remote_addr" key while previously it used the "$binary_remote_addr" key in /etc/numaproxy/site.conf:5` {
		t.Fatal(err)
	}
}
