package proxy

import (
	"strings"
	"testing"
)

// What numaproxy does not implement is refused with its place, never accepted
// silently; a proxy_cache names a declared zone.
func TestCacheDirectivesRefused(t *testing.T) {
	for _, tc := range []struct{ directive, want string }{
		{"proxy_cache_path c keys_zone=z:1m min_free=1m;", `invalid value "min_free=1m"`},
		{"proxy_cache_path c keys_zone=z:1m manager_files=10;", `invalid value "manager_files=10"`},
		{"proxy_cache_path c keys_zone=z:1m loader_sleep=1s;", `invalid value "loader_sleep=1s"`},
		{"proxy_cache_path c keys_zone=z:1m levels=3;", `invalid value "levels=3"`},
		{"proxy_cache_path c levels=1:2;", `must have "keys_zone"`},
		{"proxy_cache_path c keys_zone=z:1m; proxy_cache_background_update on;", "not supported"},
		{"proxy_cache $zone;", "variables"},
		{"proxy_cache nozone;", `zone "nozone" is unknown`},
		{"proxy_cache_use_stale error non_idempotent;", `invalid value "non_idempotent"`},
		{"proxy_cache_methods GET PUT;", `invalid value "PUT"`},
	} {
		_, err := loadConf(t, "events {}\nhttp {\n"+tc.directive+"\nserver { listen 127.0.0.1:1; location / { proxy_pass http://127.0.0.1:2; } }\n}\n")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "t.conf:") {
			t.Errorf("%s: %v, want an error with %q and its place", tc.directive, err, tc.want)
		}
	}
	cfg := mustConf(t, "events {}\nhttp {\nproxy_cache_path c levels=1:2 keys_zone=z:1m inactive=1m max_size=1g use_temp_path=off;\n"+
		"server { listen 127.0.0.1:1; proxy_cache z; proxy_cache_valid 200 302 10m; proxy_cache_valid any 1m; location / { proxy_pass http://127.0.0.1:2; proxy_cache_revalidate on; } }\n}\n")
	l := lc(cfg.HTTP.Servers[0].Locations[0])
	if l.Cache.Zone == nil || l.Cache.Zone.target == nil || l.Cache.Zone.target.cfg.MaxSize != 1<<30 || !l.Cache.Revalidate ||
		l.Cache.validFor(302) == 0 || l.Cache.validFor(404) == 0 {
		t.Fatalf("inherited cache config: %+v", l.Cache)
	}
}
