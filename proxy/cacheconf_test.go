package proxy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/cache"
)

// What numaproxy does not implement is refused with its place, never accepted
// silently; a proxy_cache names a declared zone.
func TestCacheDirectivesRefused(t *testing.T) {
	for _, tc := range []struct{ directive, want string }{
		{"proxy_cache_path c keys_zone=z:1m min_free=1x;", `invalid value "min_free=1x"`},
		{"proxy_cache_path c keys_zone=z:1m manager_files=-1;", `invalid value "manager_files=-1"`},
		{"proxy_cache_path c keys_zone=z:1m loader_sleep=1q;", `invalid value "loader_sleep=1q"`},
		{"proxy_cache_path c keys_zone=z:1m loader_bogus=1;", `invalid value "loader_bogus=1"`},
		{"proxy_cache_path c keys_zone=z:1m levels=3;", `invalid value "levels=3"`},
		{"proxy_cache_path c levels=1:2;", `must have "keys_zone"`},
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
	cfg := mustConf(t, "events {}\nhttp {\nproxy_cache_path c levels=1:2 keys_zone=z:1m inactive=1m max_size=1g use_temp_path=off "+
		"min_free=10m manager_files=7 manager_sleep=1s manager_threshold=300ms loader_files=0 loader_sleep=0 loader_threshold=2s;\n"+
		"server { listen 127.0.0.1:1; proxy_cache z; proxy_cache_valid 200 302 10m; proxy_cache_valid any 1m; location / { proxy_pass http://127.0.0.1:2; proxy_cache_revalidate on; } }\n}\n")
	l := lc(cfg.HTTP.Servers[0].Locations[0])
	if l.Cache.Zone == nil || l.Cache.Zone.target == nil || l.Cache.Zone.target.cfg.MaxSize != 1<<30 || !l.Cache.Revalidate ||
		l.Cache.validFor(302) == 0 || l.Cache.validFor(404) == 0 {
		t.Fatalf("inherited cache config: %+v", l.Cache)
	}
	want := cache.Config{Dir: l.Cache.Zone.target.cfg.Dir, Levels: []int{1, 2}, Name: "z", KeysSize: 1 << 20, Inactive: time.Minute, MaxSize: 1 << 30,
		MinFree: 10 << 20, ManagerFiles: 7, ManagerSleep: time.Second, ManagerThreshold: 300 * time.Millisecond,
		LoaderFiles: 1, LoaderSleep: time.Nanosecond, LoaderThreshold: 2 * time.Second}
	if got := l.Cache.Zone.target.cfg; !reflect.DeepEqual(got, want) {
		t.Fatalf("proxy_cache_path: %+v, want %+v", got, want)
	}
}
