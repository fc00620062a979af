package proxy

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/cache"
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// CacheConf is the proxy_cache directives of one level.
type CacheConf struct {
	Zone        *cacheZone         // proxy_cache; nil: off
	Key         *httpcore.Template // nil: the default, compiled with the snapshot (snapState.cacheKey)
	Valid       []cacheValid
	Methods     cacheMethods
	MinUses     int
	Bypass      []*httpcore.Template
	NoCache     []*httpcore.Template
	UseStale    NextUpstream // with UseStaleUpdating
	Lock        bool
	LockTimeout time.Duration
	LockAge     time.Duration
	ConvertHead bool
	Revalidate  bool
	// BackgroundUpdate: with UseStaleUpdating, the request that finds an entry
	// expired is answered with it and a background request fetches it anew.
	BackgroundUpdate bool
}

// UseStaleUpdating is proxy_cache_use_stale's updating, beside the conditions it
// shares with proxy_next_upstream.
const UseStaleUpdating = NextNonIdempotent << 1

// cacheZone is a keys zone a configuration names: its proxy_cache_path, and the zone
// the snapshot opened (Init).
type cacheZone struct {
	cfg    cache.Config
	pos    conf.Pos
	zone   *cache.Zone // of a proxy_cache_path, opened by Init
	target *cacheZone  // of a proxy_cache: its proxy_cache_path
}

type cacheValid struct {
	codes []int // nil: 200, 301, 302; {0}: any
	valid time.Duration
}

type cacheMethods uint8

const (
	cacheGET cacheMethods = 1 << iota
	cacheHEAD
	cachePOST
)

// validFor is proxy_cache_valid's time for status code, 0 when none.
func (c *CacheConf) validFor(code int) time.Duration {
	for _, v := range c.Valid {
		for _, k := range v.codes {
			if k == code || k == 0 {
				return v.valid
			}
		}
	}
	return 0
}

func cacheDefaults() CacheConf {
	return CacheConf{
		Methods:     cacheGET | cacheHEAD,
		MinUses:     1,
		UseStale:    0,
		LockTimeout: 5 * time.Second,
		LockAge:     5 * time.Second,
		ConvertHead: true,
	}
}

// Bits of LocConf.set for the cache directives.
const (
	bitCache = bitProxyProtocol << (iota + 1)
	bitCacheKey
	bitCacheValid
	bitCacheMethods
	bitCacheMinUses
	bitCacheBypass
	bitNoCache
	bitUseStale
	bitCacheLock
	bitLockTimeout
	bitLockAge
	bitConvertHead
	bitRevalidate
	bitBackgroundUpdate
)

var cacheInherited = []conf.Inherited[LocConf]{
	{Bit: bitCache, Take: func(c, p *LocConf) { c.Cache.Zone = p.Cache.Zone }},
	{Bit: bitCacheKey, Take: func(c, p *LocConf) { c.Cache.Key = p.Cache.Key }},
	{Bit: bitCacheValid, Take: func(c, p *LocConf) { c.Cache.Valid = p.Cache.Valid }},
	{Bit: bitCacheMethods, Take: func(c, p *LocConf) { c.Cache.Methods = p.Cache.Methods }},
	{Bit: bitCacheMinUses, Take: func(c, p *LocConf) { c.Cache.MinUses = p.Cache.MinUses }},
	{Bit: bitCacheBypass, Take: func(c, p *LocConf) { c.Cache.Bypass = p.Cache.Bypass }},
	{Bit: bitNoCache, Take: func(c, p *LocConf) { c.Cache.NoCache = p.Cache.NoCache }},
	{Bit: bitUseStale, Take: func(c, p *LocConf) { c.Cache.UseStale = p.Cache.UseStale }},
	{Bit: bitCacheLock, Take: func(c, p *LocConf) { c.Cache.Lock = p.Cache.Lock }},
	{Bit: bitLockTimeout, Take: func(c, p *LocConf) { c.Cache.LockTimeout = p.Cache.LockTimeout }},
	{Bit: bitLockAge, Take: func(c, p *LocConf) { c.Cache.LockAge = p.Cache.LockAge }},
	{Bit: bitConvertHead, Take: func(c, p *LocConf) { c.Cache.ConvertHead = p.Cache.ConvertHead }},
	{Bit: bitRevalidate, Take: func(c, p *LocConf) { c.Cache.Revalidate = p.Cache.Revalidate }},
	{Bit: bitBackgroundUpdate, Take: func(c, p *LocConf) { c.Cache.BackgroundUpdate = p.Cache.BackgroundUpdate }},
}

func cacheFlag(field func(*CacheConf) *bool, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseFlag, func(lc *LocConf) *bool { return field(&lc.Cache) }, setMask, bit)
}

func cacheDirectives() []conf.Directive {
	return []conf.Directive{
		{Name: "proxy_cache_path", Contexts: conf.HTTPCtx, Args: conf.Args2More, Multi: true, Set: setCachePath,
			Syntax: "proxy_cache_path path [levels=levels] keys_zone=name:size [inactive=time] [max_size=size] [min_free=size] [manager_files=number] [manager_sleep=time] [manager_threshold=time] [loader_files=number] [loader_sleep=time] [loader_threshold=time] [use_temp_path=on|off];",
			Doc:    "Declares a cache: entries are files under path (levels of 1 or 2 hex digits from the end of the MD5 of the key, as nginx's), written to a temporary file in path and renamed when complete (use_temp_path is accepted; the temporary file is always in path, which keeps the rename on one filesystem). The keys zone indexes them in memory for the whole process (every loop and domain), size bounding the keys (about 8000 per megabyte, least recently used evicted). A loader indexes the files already there at start (at once, where nginx waits a minute), at most loader_files (100) files and loader_threshold (200ms) per iteration with a pause of loader_sleep (50ms) between; a manager removes entries not used for inactive (10m), then the least recently used while the cache is beyond max_size or its file system has less than min_free available (statfs), at most manager_files (100) files and manager_threshold (200ms) per iteration with a pause of manager_sleep (50ms) when one reached them, both off the event loops."},
		{Name: "proxy_cache", Contexts: hsl, Args: conf.Args1, Set: setCache,
			Syntax: "proxy_cache zone | off;", Default: "off",
			Doc: "Caches responses in a zone of proxy_cache_path (a zone made of variables is refused). $upstream_cache_status tells MISS, BYPASS, EXPIRED, STALE, UPDATING or HIT."},
		{Name: "proxy_cache_key", Contexts: hsl, Args: conf.Args1, Set: setCacheKey,
			Syntax: "proxy_cache_key string;", Default: "$scheme$proxy_host$request_uri",
			Doc: "The key of a cached response (variables allowed)."},
		{Name: "proxy_cache_valid", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setCacheValid,
			Syntax: "proxy_cache_valid [code ... | any] time;",
			Doc:    "How long responses with these statuses stay fresh (no code: 200, 301, 302). X-Accel-Expires, then Cache-Control's s-maxage or max-age, then Expires take precedence unless proxy_ignore_headers names them; Cache-Control no-cache, no-store or private, a Set-Cookie or Vary: * keep a response out; a response with Vary is stored as a variant of its key, picked by the request's fields it names (the variants of a key are found again after a restart once one is fetched anew)."},
		{Name: "proxy_cache_methods", Contexts: hsl, Args: conf.Args1More, Set: setCacheMethods,
			Syntax: "proxy_cache_methods GET | HEAD | POST ...;", Default: "GET HEAD",
			Doc: "Methods whose responses are cached (GET and HEAD always are)."},
		{Name: "proxy_cache_min_uses", Contexts: hsl, Args: conf.Args1, Set: setNumber(func(lc *LocConf) *int { return &lc.Cache.MinUses }, bitCacheMinUses),
			Syntax: "proxy_cache_min_uses number;", Default: "1",
			Doc: "Requests for a key before its response is cached."},
		{Name: "proxy_cache_bypass", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setCacheConditions(func(c *CacheConf) *[]*httpcore.Template { return &c.Bypass }, bitCacheBypass),
			Syntax: "proxy_cache_bypass string ...;",
			Doc:    "A value that is not empty and not \"0\" makes the request go to the upstream (BYPASS); its response may still be cached."},
		{Name: "proxy_no_cache", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setCacheConditions(func(c *CacheConf) *[]*httpcore.Template { return &c.NoCache }, bitNoCache),
			Syntax: "proxy_no_cache string ...;",
			Doc:    "A value that is not empty and not \"0\" keeps the response out of the cache."},
		{Name: "proxy_cache_use_stale", Contexts: hsl, Args: conf.Args1More, Set: setUseStale,
			Syntax: "proxy_cache_use_stale error | timeout | invalid_header | updating | http_500 | http_502 | http_503 | http_504 | http_403 | http_404 | http_429 | off ...;", Default: "off",
			Doc: "When an expired entry is served instead (STALE): the upstream failed as proxy_next_upstream's conditions say, or (updating) another request is fetching it (UPDATING). The stored response's Cache-Control stale-while-revalidate=N does what updating does, and stale-if-error=N what error and timeout do (not the statuses, as nginx 1.22), for N seconds past its expiry."},
		{Name: "proxy_cache_lock", Contexts: hsl, Args: conf.Flag, Set: cacheFlag(func(c *CacheConf) *bool { return &c.Lock }, bitCacheLock),
			Syntax: "proxy_cache_lock on | off;", Default: "off",
			Doc: "One request at a time fetches a new entry; the others wait for it (polling every 50 ms) up to proxy_cache_lock_timeout, then go to the upstream without caching."},
		{Name: "proxy_cache_lock_timeout", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.Cache.LockTimeout }, bitLockTimeout),
			Syntax: "proxy_cache_lock_timeout time;", Default: "5s",
			Doc: "Longest wait of proxy_cache_lock."},
		{Name: "proxy_cache_lock_age", Contexts: hsl, Args: conf.Args1, Set: setDuration(func(c *LocConf) *time.Duration { return &c.Cache.LockAge }, bitLockAge),
			Syntax: "proxy_cache_lock_age time;", Default: "5s",
			Doc: "A fetch under proxy_cache_lock that has not ended in this time lets one more request go to the upstream."},
		{Name: "proxy_cache_convert_head", Contexts: hsl, Args: conf.Flag, Set: cacheFlag(func(c *CacheConf) *bool { return &c.ConvertHead }, bitConvertHead),
			Syntax: "proxy_cache_convert_head on | off;", Default: "on",
			Doc: "on: a HEAD request that goes to the upstream for a cached location asks with GET, so that the response can be cached."},
		{Name: "proxy_cache_background_update", Contexts: hsl, Args: conf.Flag, Set: cacheFlag(func(c *CacheConf) *bool { return &c.BackgroundUpdate }, bitBackgroundUpdate),
			Syntax: "proxy_cache_background_update on | off;", Default: "off",
			Doc: "on, with proxy_cache_use_stale updating: the request that finds its entry expired is answered with it at once (STALE) while a background request, which outlives it and its client, fetches the entry anew and stores it as a miss would (an error leaves the expired entry); the requests meanwhile get it too (UPDATING). The background request has no body: a POST (proxy_cache_methods) goes upstream itself."},
		{Name: "proxy_cache_revalidate", Contexts: hsl, Args: conf.Flag, Set: cacheFlag(func(c *CacheConf) *bool { return &c.Revalidate }, bitRevalidate),
			Syntax: "proxy_cache_revalidate on | off;", Default: "off",
			Doc: "on: an expired entry with Last-Modified or ETag is asked for with If-Modified-Since and If-None-Match; an upstream's 304 makes it fresh again (REVALIDATED) for what the 304's fields or proxy_cache_valid say."},
	}
}

func setCachePath(c *conf.Cursor, s *conf.Stmt) error {
	dir := c.Path(s.Args[0].Value)
	z := &cacheZone{pos: s.Pos, cfg: cache.Config{Dir: filepath.Clean(dir), Inactive: 10 * time.Minute}}
	for _, a := range s.Args[1:] {
		name, v, _ := strings.Cut(a.Value, "=")
		switch name {
		case "levels":
			for _, l := range strings.Split(v, ":") {
				n, err := strconv.Atoi(l)
				if err != nil || n < 1 || n > 2 || len(z.cfg.Levels) == 3 {
					return s.InvalidValue(a, "")
				}
				z.cfg.Levels = append(z.cfg.Levels, n)
			}
		case "keys_zone":
			zn, size, ok := strings.Cut(v, ":")
			n, err := conf.ParseSize(size)
			if !ok || zn == "" || err != nil || n < 8192 {
				return s.InvalidValue(a, "")
			}
			z.cfg.Name, z.cfg.KeysSize = zn, n
		case "inactive":
			d, err := conf.ParseTime(v)
			if err != nil || d <= 0 {
				return s.InvalidValue(a, "")
			}
			z.cfg.Inactive = d
		case "max_size":
			n, err := conf.ParseSize(v)
			if err != nil {
				return s.InvalidValue(a, "")
			}
			z.cfg.MaxSize = n
		case "min_free":
			n, err := conf.ParseSize(v)
			if err != nil {
				return s.InvalidValue(a, "")
			}
			z.cfg.MinFree = n
		case "manager_files", "loader_files":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return s.InvalidValue(a, "")
			}
			n = max(n, 1) // 0 pauses after every file, as 1 does
			if name == "manager_files" {
				z.cfg.ManagerFiles = n
			} else {
				z.cfg.LoaderFiles = n
			}
		case "manager_sleep", "manager_threshold", "loader_sleep", "loader_threshold":
			d, err := conf.ParseTime(v)
			if err != nil {
				return s.InvalidValue(a, "")
			}
			d = max(d, time.Nanosecond) // 0: no pause, or a pause after every file (cache.Config's zero is nginx's default)
			*map[string]*time.Duration{"manager_sleep": &z.cfg.ManagerSleep, "manager_threshold": &z.cfg.ManagerThreshold,
				"loader_sleep": &z.cfg.LoaderSleep, "loader_threshold": &z.cfg.LoaderThreshold}[name] = d
		case "use_temp_path":
			if v != "on" && v != "off" {
				return s.InvalidValue(a, "")
			}
		default:
			return s.InvalidValue(a, "not supported by numaproxy")
		}
	}
	if z.cfg.Name == "" {
		return s.Errorf("\"%s\" must have \"keys_zone\" parameter", s.Name)
	}
	lc := locConf(c)
	for _, o := range lc.cachePaths {
		if o.cfg.Name == z.cfg.Name {
			return s.Errorf("duplicate zone \"%s\"", z.cfg.Name)
		}
		if o.cfg.Dir == z.cfg.Dir {
			return s.Errorf("duplicate path \"%s\"", z.cfg.Dir)
		}
	}
	lc.cachePaths = append(lc.cachePaths, z)
	return nil
}

func setCache(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitCache != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	lc.set |= bitCache
	v := s.Args[0].Value
	if v == "off" {
		lc.Cache.Zone = nil
		return nil
	}
	if strings.Contains(v, "$") {
		return s.InvalidValue(s.Args[0], "a zone made of variables is not supported by numaproxy")
	}
	// Resolved to its proxy_cache_path once the whole file is read (checkCache).
	lc.Cache.Zone = &cacheZone{cfg: cache.Config{Name: v}, pos: s.Pos}
	return nil
}

func setCacheKey(c *conf.Cursor, s *conf.Stmt) error {
	t, err := httpcore.CompileTemplate(c, s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	lc := locConf(c)
	lc.Cache.Key, lc.set = t, lc.set|bitCacheKey
	return nil
}

func setCacheValid(c *conf.Cursor, s *conf.Stmt) error {
	last := s.Args[len(s.Args)-1]
	d, err := conf.ParseTime(last.Value)
	if err != nil {
		return s.InvalidValue(last, "")
	}
	v := cacheValid{valid: d}
	for _, a := range s.Args[:len(s.Args)-1] {
		if a.Value == "any" {
			v.codes = append(v.codes, 0)
			continue
		}
		n, err := strconv.Atoi(a.Value)
		if err != nil || n < 100 || n > 599 {
			return s.InvalidValue(a, "")
		}
		v.codes = append(v.codes, n)
	}
	if v.codes == nil {
		v.codes = []int{200, 301, 302}
	}
	lc := locConf(c)
	if lc.set&bitCacheValid == 0 {
		lc.Cache.Valid = nil
		lc.set |= bitCacheValid
	}
	lc.Cache.Valid = append(lc.Cache.Valid, v)
	return nil
}

func setCacheMethods(c *conf.Cursor, s *conf.Stmt) error {
	m := cacheGET | cacheHEAD
	for _, a := range s.Args {
		switch a.Value {
		case "GET":
		case "HEAD":
		case "POST":
			m |= cachePOST
		default:
			return s.InvalidValue(a, "")
		}
	}
	lc := locConf(c)
	lc.Cache.Methods, lc.set = m, lc.set|bitCacheMethods
	return nil
}

func setCacheConditions(field func(*CacheConf) *[]*httpcore.Template, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return func(c *conf.Cursor, s *conf.Stmt) error {
		lc := locConf(c)
		if lc.set&bit == 0 {
			*field(&lc.Cache) = nil
			lc.set |= bit
		}
		for _, a := range s.Args {
			t, err := httpcore.CompileTemplate(c, a.Value)
			if err != nil {
				return s.InvalidValue(a, err.Error())
			}
			*field(&lc.Cache) = append(*field(&lc.Cache), t)
		}
		return nil
	}
}

func setUseStale(c *conf.Cursor, s *conf.Stmt) error {
	var n NextUpstream
	for _, a := range s.Args {
		switch a.Value {
		case "off":
			if len(s.Args) > 1 {
				return s.InvalidValue(a, `"off" stands alone`)
			}
			continue
		case "updating":
			n |= UseStaleUpdating
			continue
		case "non_idempotent":
			return s.InvalidValue(a, "")
		}
		bit, ok := nextUpstreamNames[a.Value]
		if !ok {
			return s.InvalidValue(a, "")
		}
		n |= bit
	}
	lc := locConf(c)
	lc.Cache.UseStale, lc.set = n, lc.set|bitUseStale
	return nil
}

// checkCache resolves each proxy_cache to its proxy_cache_path.
func checkCache(cfg *conf.Config, self *conf.Module) error {
	paths := cfg.HTTP.Conf(self).(*LocConf).cachePaths
	var err error
	httpcore.Walk(cfg, self, func(v any) {
		lc := v.(*LocConf)
		z := lc.Cache.Zone
		if z == nil || z.target != nil || err != nil {
			return
		}
		for _, p := range paths {
			if p.cfg.Name == z.cfg.Name {
				z.target = p
				return
			}
		}
		err = &conf.Error{Pos: z.pos, Msg: "\"proxy_cache\" zone \"" + z.cfg.Name + "\" is unknown"}
	})
	return err
}
