package limit

import (
	"strings"
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/internal/conftest"
)

func loadConf(t testing.TB, src string) (*conf.Config, error) {
	t.Helper()
	return conftest.Load(t, conf.MustRegistry(httpcore.Module, Module), src)
}

// TestModuleInheritance: a level without limit_req takes its parent's whole list,
// the status, level and dry run one by one, as nginx.
func TestModuleInheritance(t *testing.T) {
	cfg, err := loadConf(t, `http {
	limit_req_zone $binary_remote_addr zone=a:1m rate=1r/s;
	limit_req_zone $server_name zone=b:1m rate=10r/m;
	limit_conn_zone $binary_remote_addr zone=c:1m;
	limit_req zone=a burst=5;
	limit_req zone=b nodelay;
	limit_req_status 429;
	server {
		limit_conn c 3;
		location /inherit { limit_req_dry_run on; }
		location /own { limit_req zone=b; limit_conn_log_level warn; }
	}
}`)
	if err != nil {
		t.Fatal(err)
	}
	zones := func(l []ReqLimitConfig) string {
		var s []string
		for _, x := range l {
			s = append(s, x.Zone)
		}
		return strings.Join(s, ",")
	}
	locs := cfg.HTTP.Servers[0].Locations
	in, own := locs[0].Conf(Module).(*LocConf), locs[1].Conf(Module).(*LocConf)
	if zones(in.Req) != "a,b" || in.ReqStatus != 429 || !in.ReqDryRun || len(in.Conn) != 1 || in.Conn[0].Conn != 3 {
		t.Errorf("inherit: %+v", in)
	}
	if zones(own.Req) != "b" || own.ReqStatus != 429 || own.ReqDryRun || len(own.Conn) != 1 || own.ConnLogLevel.String() != "WARN" {
		t.Errorf("own: %+v", own)
	}
}

// TestModuleErrors: what nginx -t refuses, with the file and line.
func TestModuleErrors(t *testing.T) {
	for src, want := range map[string]string{
		"http {\nlimit_req_zone $binary_remote_addr zone=a:1m rate=1r/s sync;\n}":                                    `t.conf:2`,
		"http {\nlimit_req_zone $binary_remote_addr zone=a:1m rate=1r/s sync;\n}\n":                                  `"sync" parameter`,
		"http {\nlimit_conn_zone $binary_remote_addr zone=a:1m sync;\n}\n":                                           `"sync" parameter`,
		"http { server { location / {\nlimit_req zone=nope;\n} } }":                                                  `zero size shared memory zone "nope"`,
		"http { server { location / {\nlimit_req zone=nope;\n} } }\n":                                                `t.conf:2`,
		"http { limit_conn_zone $binary_remote_addr zone=a:1m;\nserver { limit_req zone=a; } }":                      `already declared for a different use`,
		"http { limit_req_zone $binary_remote_addr zone=a:1m rate=1r/s;\nlimit_req_status 600; }":                    `value must be between 400 and 599`,
		"http { limit_req_zone $binary_remote_addr zone=a:1m rate=1r/s;\nlimit_req_zone $uri zone=a:1m rate=2r/s; }": `already bound to key`,
		"http { limit_req_zone $nosuchvar zone=a:1m rate=1r/s; }":                                                    `nosuchvar`,
		"http { server { limit_conn_log_level debug; } }":                                                            `invalid value "debug"`,
	} {
		if _, err := loadConf(t, src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q:\n err %v\nwant %s", src, err, want)
		}
	}
}
