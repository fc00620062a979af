package static

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/numaproxy/numaproxy/conf"
)

// Module declares the directives of nginx's static file serving: the core module's
// file directives (root, alias, types, try_files, open_file_cache, sendfile ...),
// index, autoindex, try_files, expires (headers module) and the header part of
// charset. core.go wires it into the HTTP core.
var Module = &conf.Module{
	Name:       "static",
	Directives: directives(),
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { return child.(*LocConf).inherit(parent.(*LocConf)) },
	Check:      check,
}

const (
	hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx
	sl  = conf.ServerCtx | conf.LocationCtx
)

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "root", Contexts: hsl, Args: conf.Args1, Set: setRoot,
			Syntax: "root path;", Default: "html",
			Doc: "Folder that request URIs map to: the file is root followed by the URI. A relative path is under the prefix."},
		{Name: "alias", Contexts: conf.LocationCtx, Args: conf.Args1, Set: setRoot,
			Syntax: "alias path;",
			Doc:    "Replaces the part of the URI the location matched with path (the whole file name in a regex location, where captures build it). A path outside the alias (a \"..\" left over from a location without a trailing slash) is refused with 403."},
		{Name: "index", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setIndex,
			Syntax: "index file ...;", Default: "index.html",
			Doc: "Files tried in order for a URI ending in \"/\"; the first that exists is an internal redirect to it. A last name starting with \"/\" is a redirect without a test."},
		{Name: "try_files", Contexts: sl, Args: conf.Args2More, Set: setTryFiles,
			Syntax: "try_files file ... uri | file ... =code;",
			Doc:    "Serves the first file (or \"dir/\" folder) that exists under the root, else redirects internally to the last argument: a URI, a @named location or =code. Not inherited."},
		{Name: "types", Contexts: hsl, Args: conf.Args0, Block: true, Multi: true, Set: setTypes,
			Syntax: "types { type extension ...; ... }", Default: "text/html html; image/gif gif; image/jpeg jpg;",
			Doc: "Maps file name extensions (any case) to the Content-Type of files; nginx's mime.types can be included."},
		{Name: "default_type", Contexts: hsl, Args: conf.Args1, Set: setDefaultType,
			Syntax: "default_type mime-type;", Default: "text/plain",
			Doc: "Content-Type of a file whose extension types does not list."},
		{Name: "etag", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.ETag }, bitETag),
			Syntax: "etag on | off;", Default: "on",
			Doc: "Sends ETag \"mtime-size\" (both hex) with files and answers If-None-Match and If-Match with it."},
		{Name: "if_modified_since", Contexts: hsl, Args: conf.Args1, Set: setIfModifiedSince,
			Syntax: "if_modified_since off | exact | before;", Default: "exact",
			Doc: "How If-Modified-Since is compared with the file's time for a 304: not at all, equal, or equal or later."},
		{Name: "max_ranges", Contexts: hsl, Args: conf.Args1, Set: setMaxRanges,
			Syntax: "max_ranges number;",
			Doc:    "Most ranges one request may ask for; past it the whole file is sent. 0 disables ranges."},
		{Name: "expires", Contexts: hsl, Args: conf.Args1 | conf.Args2, Set: setExpires,
			Syntax: "expires [modified] time | epoch | max | off;", Default: "off",
			Doc: "Sets Expires and Cache-Control: max-age for 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308 responses: time after the request (or after the file's modification with modified), @time of day, a negative time (no-cache), epoch or max."},
		{Name: "charset", Contexts: hsl, Args: conf.Args1, Set: setCharset,
			Syntax: "charset charset | off;", Default: "off",
			Doc: "Adds \"; charset=\" to the Content-Type of responses whose type charset_types lists."},
		{Name: "source_charset", Contexts: hsl, Args: conf.Args1, Set: setCharset,
			Syntax: "source_charset charset;",
			Doc:    "The charset responses are written in. It must be the one charset names: nginx recodes between two charsets only with a charset_map, which numaproxy does not have, and refuses them without one."},
		{Name: "charset_types", Contexts: hsl, Args: conf.Args1More, Multi: true, Set: setCharsetTypes,
			Syntax: "charset_types mime-type ...;", Default: "text/html text/xml text/plain text/vnd.wap.wml application/javascript application/rss+xml",
			Doc: "Types that charset applies to (text/html always); \"*\" for any."},
		{Name: "log_not_found", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.LogNotFound }, bitLogNotFound),
			Syntax: "log_not_found on | off;", Default: "on",
			Doc: "Logs files that are not found to the error log."},
		{Name: "disable_symlinks", Contexts: hsl, Args: conf.Args1 | conf.Args2, Set: setDisableSymlinks,
			Syntax: "disable_symlinks off | on | if_not_owner [from=part];", Default: "off",
			Doc: "on: a symbolic link anywhere in a file's path is refused (403 for the file itself, 404 for a folder on the way); if_not_owner: only where the link and its target have different owners. from= leaves the path's first part unchecked."},
		{Name: "open_file_cache", Contexts: hsl, Args: conf.Args1 | conf.Args2, Set: setOpenFileCache,
			Syntax: "open_file_cache off | max=N [inactive=time];", Default: "off",
			Doc: "Keeps open descriptors, sizes and times of files (and lookup errors with open_file_cache_errors), at most N per loop; entries not used for inactive (60s) are dropped, the least recently used first when full."},
		{Name: "open_file_cache_valid", Contexts: hsl, Args: conf.Args1, Set: setSeconds(func(c *LocConf) *time.Duration { return &c.CacheValid }, bitCacheValid),
			Syntax: "open_file_cache_valid time;", Default: "60s",
			Doc: "How long a cached entry is used before it is checked against the file system again."},
		{Name: "open_file_cache_min_uses", Contexts: hsl, Args: conf.Args1, Set: setCacheMinUses,
			Syntax: "open_file_cache_min_uses number;", Default: "1",
			Doc: "Uses within inactive a file needs for its descriptor to stay open between requests."},
		{Name: "open_file_cache_errors", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.CacheErrors }, bitCacheErrors),
			Syntax: "open_file_cache_errors on | off;", Default: "off",
			Doc: "Caches lookup errors (not found, forbidden) too."},
		{Name: "autoindex", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Autoindex }, bitAutoindex),
			Syntax: "autoindex on | off;", Default: "off",
			Doc: "Lists a folder whose URI ends in \"/\" when it has no index file."},
		{Name: "autoindex_exact_size", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.AutoindexExactSize }, bitAutoindexExact),
			Syntax: "autoindex_exact_size on | off;", Default: "on",
			Doc: "HTML listings show sizes in bytes, or rounded to K, M and G."},
		{Name: "autoindex_format", Contexts: hsl, Args: conf.Args1, Set: setAutoindexFormat,
			Syntax: "autoindex_format html | xml | json | jsonp;", Default: "html",
			Doc: "Format of listings; jsonp wraps json in the function the callback argument names."},
		{Name: "autoindex_localtime", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.AutoindexLocaltime }, bitAutoindexLocaltime),
			Syntax: "autoindex_localtime on | off;", Default: "off",
			Doc: "HTML listings show times in local time rather than UTC."},
		{Name: "sendfile", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.Sendfile }, bitSendfile),
			Syntax: "sendfile on | off;", Default: "off",
			Doc: "Sends files with sendfile(2) from the event loop, without copying them through the process; what the socket does not take waits for it to drain (other connections are served meanwhile). A file of up to 8 KiB is read and goes out with the response head in one write. Off: files are read with pread(2) into pool buffers as the socket drains."},
		{Name: "sendfile_max_chunk", Contexts: hsl, Args: conf.Args1, Set: setSize(func(c *LocConf) *int64 { return &c.SendfileMaxChunk }, bitSendfileMaxChunk),
			Syntax: "sendfile_max_chunk size;", Default: "2m",
			Doc: "Most file bytes one connection sends per turn of the event loop (sendfile on or off), so one fast client does not hold the loop (0: no limit)."},
		{Name: "tcp_nopush", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.TCPNoPush }, bitTCPNoPush),
			Syntax: "tcp_nopush on | off;", Default: "off",
			Doc: "With sendfile, sets TCP_CORK while the response head and the file are handed to the kernel, so they go out in full packets; uncorked once the response is queued."},
		{Name: "tcp_nodelay", Contexts: hsl, Args: conf.Flag, Set: setFlag(func(c *LocConf) *bool { return &c.TCPNoDelay }, bitTCPNoDelay),
			Syntax: "tcp_nodelay on | off;", Default: "on",
			Doc: "Client connections have TCP_NODELAY from the accept on (nginx sets it when a connection is kept alive); off clears it before the location's response, proxied or not."},
		{Name: "aio", Contexts: hsl, Args: conf.Args1, Set: setAIO,
			Syntax: "aio off;", Default: "off",
			Doc: "Only off: numaproxy reads files on its event loops (sendfile, or pread with sendfile off), as nginx with aio off, so a cold disk blocks the loop as it blocks an nginx worker. threads and on are refused (on is also refused by Debian's nginx, which has no file AIO)."},
		{Name: "directio", Contexts: hsl, Args: conf.Args1, Set: setDirectIO,
			Syntax: "directio off;", Default: "off",
			Doc: "Only off: files are sent through the page cache. A size (O_DIRECT for larger files, with aligned reads instead of sendfile) is refused."},
		{Name: "directio_alignment", Contexts: hsl, Args: conf.Args1, Set: setSize(func(c *LocConf) *int64 { return &c.DirectIOAlignment }, bitDirectIOAlignment), NoEffect: true,
			Syntax: "directio_alignment size;", Default: "512",
			Doc: "Accepted and validated; without directio it has nothing to align."},
	}
}

// IMSMode is if_modified_since.
type IMSMode int

const (
	IMSExact IMSMode = iota
	IMSOff
	IMSBefore
)

// SymlinkMode is disable_symlinks.
type SymlinkMode int

const (
	SymlinksOff SymlinkMode = iota
	SymlinksOn
	SymlinksIfNotOwner
)

// AutoindexFormat is autoindex_format.
type AutoindexFormat int

const (
	FormatHTML AutoindexFormat = iota
	FormatJSON
	FormatJSONP
	FormatXML
)

// DirectIOOff is LocConf.DirectIO when directio is off.
const DirectIOOff = int64(1<<63 - 1)

// LocConf holds the module's directives at one level (http, server, location), after
// inheritance.
type LocConf struct {
	// Root is root or alias, absolute; RootTmpl is set instead when it has variables
	// (see MapURI). The path of a URI is Root followed by the URI without its first
	// AliasLen bytes; AliasWhole says the alias is the whole path (regex location).
	Root       []byte
	RootTmpl   *Template
	Alias      bool
	AliasLen   int
	AliasWhole bool
	prefix     string // the configuration prefix, for a root that starts with a variable

	Index    []*Template // never empty once merged
	TryFiles []TryFile   // nil: none here (try_files is not inherited)

	Types       *Types
	DefaultType []byte

	ETag            bool
	IfModifiedSince IMSMode
	MaxRanges       int // -1: no limit
	Expires         Expires

	Charset       string // "" when off
	SourceCharset string // "" when unset
	CharsetTypes  *TypeSet

	LogNotFound bool

	DisableSymlinks SymlinkMode
	SymlinksFrom    *Template // nil: check the whole path

	OpenFileCache *CacheSpec // nil: off
	CacheValid    time.Duration
	CacheMinUses  int
	CacheErrors   bool

	Autoindex          bool
	AutoindexExactSize bool
	AutoindexFormat    AutoindexFormat
	AutoindexLocaltime bool

	Sendfile          bool
	SendfileMaxChunk  int64
	TCPNoPush         bool
	TCPNoDelay        bool
	DirectIO          int64 // DirectIOOff when off
	DirectIOAlignment int64

	// captures: the root, alias, index, try_files or disable_symlinks from= name
	// regex captures ($1..$9), taken when a regex location matches (check sets it).
	captures bool

	set uint64
}

// TryFile is one try_files argument; the last one is the fallback.
type TryFile struct {
	Name    *Template // without the trailing "/" of a folder test
	TestDir bool      // written with a trailing "/": must be a folder
	Code    int       // the fallback "=code"
}

// CacheSpec is one open_file_cache directive: each loop keeps its own cache for it,
// shared by the levels that inherit it.
type CacheSpec struct {
	Max      int
	Inactive time.Duration
}

// Expires is the expires directive.
type Expires struct {
	Mode ExpiresMode
	Time time.Duration // after the access or modification; the time of day for ExpiresDaily; negative: no-cache
}

// ExpiresMode says what Expires.Time counts from.
type ExpiresMode int

const (
	ExpiresOff      ExpiresMode = iota
	ExpiresAccess               // time after the request
	ExpiresModified             // time after the file's modification
	ExpiresDaily                // @time: the next time of day (local time)
	ExpiresEpoch
	ExpiresMax
)

// Bits of LocConf.set, one per directive, for nginx's "inherit unless set here".
const (
	bitRoot = 1 << iota
	bitIndex
	bitTypes
	bitDefaultType
	bitETag
	bitIMS
	bitMaxRanges
	bitExpires
	bitCharset
	bitSourceCharset
	bitCharsetTypes
	bitLogNotFound
	bitSymlinks
	bitOpenFileCache
	bitCacheValid
	bitCacheMinUses
	bitCacheErrors
	bitAutoindex
	bitAutoindexExact
	bitAutoindexFormat
	bitAutoindexLocaltime
	bitSendfile
	bitSendfileMaxChunk
	bitTCPNoPush
	bitTCPNoDelay
	bitAIO
	bitDirectIO
	bitDirectIOAlignment
	bitTryFiles
)

// defaults is the http level before any directive: nginx's defaults. Root is filled
// in by check, which knows the prefix.
func defaults() LocConf {
	return LocConf{
		Index:              []*Template{mustTemplate("index.html")},
		Types:              defaultTypes(),
		DefaultType:        []byte("text/plain"),
		ETag:               true,
		MaxRanges:          -1,
		CharsetTypes:       newTypeSet(defaultCharsetTypes...),
		LogNotFound:        true,
		CacheValid:         60 * time.Second,
		CacheMinUses:       1,
		AutoindexExactSize: true,
		SendfileMaxChunk:   2 << 20,
		TCPNoDelay:         true,
		DirectIO:           DirectIOOff,
		DirectIOAlignment:  512,
	}
}

func mustTemplate(s string) *Template {
	t, err := CompileTemplate(s)
	if err != nil {
		panic(err)
	}
	return t
}

// inherit fills what this level did not set from its parent, nginx's merge (the
// http level from nginx's defaults first).
func (c *LocConf) inherit(parent *LocConf) error {
	conf.Inherit(c, parent, func(lc *LocConf) *uint64 { return &lc.set }, defaults, inheritedFields)
	return nil
}

// inheritedFields copies each directive's value from the parent when this level did
// not set it. try_files is not inherited, as in nginx; the alias's length goes with
// it, so a nested location keeps replacing its parent's prefix.
var inheritedFields = []conf.Inherited[LocConf]{
	{Bit: bitRoot, Take: func(c, p *LocConf) {
		c.Root, c.RootTmpl, c.Alias, c.AliasLen, c.AliasWhole = p.Root, p.RootTmpl, p.Alias, p.AliasLen, p.AliasWhole
	}},
	{Bit: bitIndex, Take: func(c, p *LocConf) { c.Index = p.Index }},
	{Bit: bitTypes, Take: func(c, p *LocConf) { c.Types = p.Types }},
	{Bit: bitDefaultType, Take: func(c, p *LocConf) { c.DefaultType = p.DefaultType }},
	{Bit: bitETag, Take: func(c, p *LocConf) { c.ETag = p.ETag }},
	{Bit: bitIMS, Take: func(c, p *LocConf) { c.IfModifiedSince = p.IfModifiedSince }},
	{Bit: bitMaxRanges, Take: func(c, p *LocConf) { c.MaxRanges = p.MaxRanges }},
	{Bit: bitExpires, Take: func(c, p *LocConf) { c.Expires = p.Expires }},
	{Bit: bitCharset, Take: func(c, p *LocConf) { c.Charset = p.Charset }},
	{Bit: bitSourceCharset, Take: func(c, p *LocConf) { c.SourceCharset = p.SourceCharset }},
	{Bit: bitCharsetTypes, Take: func(c, p *LocConf) { c.CharsetTypes = p.CharsetTypes }},
	{Bit: bitLogNotFound, Take: func(c, p *LocConf) { c.LogNotFound = p.LogNotFound }},
	{Bit: bitSymlinks, Take: func(c, p *LocConf) { c.DisableSymlinks, c.SymlinksFrom = p.DisableSymlinks, p.SymlinksFrom }},
	{Bit: bitOpenFileCache, Take: func(c, p *LocConf) { c.OpenFileCache = p.OpenFileCache }},
	{Bit: bitCacheValid, Take: func(c, p *LocConf) { c.CacheValid = p.CacheValid }},
	{Bit: bitCacheMinUses, Take: func(c, p *LocConf) { c.CacheMinUses = p.CacheMinUses }},
	{Bit: bitCacheErrors, Take: func(c, p *LocConf) { c.CacheErrors = p.CacheErrors }},
	{Bit: bitAutoindex, Take: func(c, p *LocConf) { c.Autoindex = p.Autoindex }},
	{Bit: bitAutoindexExact, Take: func(c, p *LocConf) { c.AutoindexExactSize = p.AutoindexExactSize }},
	{Bit: bitAutoindexFormat, Take: func(c, p *LocConf) { c.AutoindexFormat = p.AutoindexFormat }},
	{Bit: bitAutoindexLocaltime, Take: func(c, p *LocConf) { c.AutoindexLocaltime = p.AutoindexLocaltime }},
	{Bit: bitSendfile, Take: func(c, p *LocConf) { c.Sendfile = p.Sendfile }},
	{Bit: bitSendfileMaxChunk, Take: func(c, p *LocConf) { c.SendfileMaxChunk = p.SendfileMaxChunk }},
	{Bit: bitTCPNoPush, Take: func(c, p *LocConf) { c.TCPNoPush = p.TCPNoPush }},
	{Bit: bitTCPNoDelay, Take: func(c, p *LocConf) { c.TCPNoDelay = p.TCPNoDelay }},
	{Bit: bitDirectIO, Take: func(c, p *LocConf) { c.DirectIO = p.DirectIO }},
	{Bit: bitDirectIOAlignment, Take: func(c, p *LocConf) { c.DirectIOAlignment = p.DirectIOAlignment }},
}

func locConf(c *conf.Cursor) *LocConf { return c.HTTPConf().(*LocConf) }

// ConfOf returns the module's config for a location (merged), or for a server when
// no location matched.
func ConfOf(l *conf.Location) *LocConf { return l.Conf(Module).(*LocConf) }

// ServerConf returns the module's config of a server, used when no location matches.
func ServerConf(s *conf.Server) *LocConf { return s.Conf(Module).(*LocConf) }

// duplicate is nginx's "is duplicate" for directives that may appear once per level.
func duplicate(lc *LocConf, bit uint64, s *conf.Stmt) error {
	if lc.set&bit != 0 {
		return s.Errorf("%q directive is duplicate", s.Name)
	}
	lc.set |= bit
	return nil
}

func setMask(lc *LocConf) *uint64 { return &lc.set }

// setFlag stores on|off (checked by the parser: Flag arity).
func setFlag(field func(*LocConf) *bool, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseFlag, field, setMask, bit)
}

func setSize(field func(*LocConf) *int64, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(conf.ParseSize, field, setMask, bit)
}

// setSeconds is nginx's sec slot: a time in whole seconds ("ms" is refused).
func setSeconds(field func(*LocConf) *time.Duration, bit uint64) func(*conf.Cursor, *conf.Stmt) error {
	return conf.SetValue(parseSeconds, field, setMask, bit)
}

func parseSeconds(v string) (time.Duration, error) {
	if strings.Contains(v, "ms") {
		return 0, fmt.Errorf("invalid time %q", v)
	}
	return conf.ParseTime(v)
}

func setRoot(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	alias := s.Name == "alias"
	if lc.set&bitRoot != 0 {
		if lc.Alias == alias {
			return s.Errorf("%q directive is duplicate", s.Name)
		}
		earlier := "root"
		if lc.Alias {
			earlier = "alias"
		}
		return s.Errorf("%q directive is duplicate, %q directive was specified earlier", s.Name, earlier)
	}
	if alias && c.Location != nil && c.Location.Kind == conf.LocNamed {
		return s.Errorf(`the "alias" directive cannot be used inside the named location`)
	}
	v := s.Args[0].Value
	for _, name := range []string{"document_root", "realpath_root"} {
		if strings.Contains(v, "$"+name) || strings.Contains(v, "${"+name+"}") {
			return s.Errorf("the $%s variable cannot be used in the %q directive", name, s.Name)
		}
	}
	// As nginx: a relative path goes after the prefix now (concatenated, not
	// cleaned); one that starts with a variable when it is expanded. root loses
	// one trailing slash ("root /;" is the empty root), alias keeps it.
	if !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "$") {
		v = strings.TrimSuffix(c.Config.Prefix, "/") + "/" + v
	}
	if !alias && strings.HasSuffix(v, "/") {
		v = v[:len(v)-1]
	}
	t, err := CompileTemplate(v)
	if err != nil {
		return s.InvalidValue(s.Args[0], err.Error())
	}
	if err := checkVars(c, s, s.Args[0], t); err != nil {
		return err
	}
	lc.Alias, lc.AliasLen, lc.AliasWhole, lc.prefix = alias, 0, false, c.Config.Prefix
	if alias && c.Location != nil {
		lc.AliasLen = len(c.Location.Path)
		if c.Location.Kind == conf.LocRegex || c.Location.Kind == conf.LocRegexCaseless {
			lc.AliasWhole = true
		}
	}
	if t.HasVars() || lc.AliasWhole {
		lc.RootTmpl = t
	} else {
		lc.Root = append([]byte{}, v...) // non-nil even for "root /;"
	}
	lc.set |= bitRoot
	return nil
}

func setIndex(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if lc.set&bitIndex == 0 {
		lc.Index = nil
		lc.set |= bitIndex
	}
	for i, a := range s.Args {
		if a.Value == "" {
			return s.Errorf("index %q in \"index\" directive is invalid", s.Args[0].Value)
		}
		if a.Value[0] == '/' && i != len(s.Args)-1 {
			c.Warn(s.Pos, `only the last index in "index" directive should be absolute`)
		}
		t, err := CompileTemplate(a.Value)
		if err != nil {
			return s.InvalidValue(a, err.Error())
		}
		if err := checkVars(c, s, a, t); err != nil {
			return err
		}
		lc.Index = append(lc.Index, t)
	}
	return nil
}

func setTryFiles(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitTryFiles, s); err != nil {
		return err
	}
	for i, a := range s.Args {
		tf := TryFile{}
		name := a.Value
		last := i == len(s.Args)-1
		if !last && len(name) > 0 && name[len(name)-1] == '/' {
			tf.TestDir, name = true, name[:len(name)-1]
		}
		if last && strings.HasPrefix(name, "=") {
			code, err := strconv.Atoi(name[1:])
			if err != nil || code < 1 || code > 999 || name[1] == '+' || name[1] == '-' {
				return s.Errorf("invalid code %q", name)
			}
			tf.Code = code
		}
		t, err := CompileTemplate(name)
		if err != nil {
			return s.InvalidValue(a, err.Error())
		}
		if err := checkVars(c, s, a, t); err != nil {
			return err
		}
		tf.Name = t
		lc.TryFiles = append(lc.TryFiles, tf)
	}
	return nil
}

func setDefaultType(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitDefaultType, s); err != nil {
		return err
	}
	lc.DefaultType = []byte(s.Args[0].Value)
	return nil
}

func setIfModifiedSince(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	switch s.Args[0].Value {
	case "off":
		lc.IfModifiedSince = IMSOff
	case "exact":
		lc.IfModifiedSince = IMSExact
	case "before":
		lc.IfModifiedSince = IMSBefore
	default:
		return s.InvalidValue(s.Args[0], `it must be "off", "exact" or "before"`)
	}
	lc.set |= bitIMS
	return nil
}

func setMaxRanges(c *conf.Cursor, s *conf.Stmt) error {
	n, err := conf.ParseNumber(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	lc := locConf(c)
	lc.MaxRanges = n
	lc.set |= bitMaxRanges
	return nil
}

// setExpires is nginx's expires: [modified] then epoch | max | off | [@|+|-]time.
func setExpires(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitExpires, s); err != nil {
		return err
	}
	e := Expires{Mode: ExpiresAccess}
	arg := s.Args[0]
	if len(s.Args) == 2 {
		if s.Args[0].Value != "modified" {
			return s.InvalidValue(s.Args[0], "")
		}
		e.Mode, arg = ExpiresModified, s.Args[1]
	}
	if strings.Contains(arg.Value, "$") {
		return s.InvalidValue(arg, "variables in expires are not supported yet")
	}
	if err := parseExpires(arg.Value, &e); err != nil {
		return s.InvalidValue(arg, err.Error())
	}
	lc.Expires = e
	return nil
}

func parseExpires(v string, e *Expires) error {
	if e.Mode != ExpiresModified {
		switch v {
		case "epoch":
			e.Mode = ExpiresEpoch
			return nil
		case "max":
			e.Mode = ExpiresMax
			return nil
		case "off":
			e.Mode = ExpiresOff
			return nil
		}
	}
	minus := false
	switch {
	case strings.HasPrefix(v, "@"):
		if e.Mode == ExpiresModified {
			return fmt.Errorf(`daily time cannot be used with "modified" parameter`)
		}
		e.Mode, v = ExpiresDaily, v[1:]
	case strings.HasPrefix(v, "+"):
		v = v[1:]
	case strings.HasPrefix(v, "-"):
		minus, v = true, v[1:]
	}
	d, err := parseSeconds(v)
	if err != nil {
		return fmt.Errorf("invalid value")
	}
	if e.Mode == ExpiresDaily && d > 24*time.Hour {
		return fmt.Errorf("daily time value must be less than 24 hours")
	}
	if minus {
		d = -d
	}
	e.Time = d
	return nil
}

func setCharset(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	v := s.Args[0].Value
	if strings.HasPrefix(v, "$") {
		return s.InvalidValue(s.Args[0], "variables in "+s.Name+" are not supported yet")
	}
	if s.Name == "charset" {
		if err := duplicate(lc, bitCharset, s); err != nil {
			return err
		}
		if v == "off" {
			v = ""
		}
		lc.Charset = v
		return nil
	}
	if err := duplicate(lc, bitSourceCharset, s); err != nil {
		return err
	}
	lc.SourceCharset = v
	return nil
}

func setDisableSymlinks(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitSymlinks, s); err != nil {
		return err
	}
	modeSet, fromSet := false, false
	lc.SymlinksFrom = nil
	for _, a := range s.Args {
		switch {
		case a.Value == "off":
			lc.DisableSymlinks, modeSet = SymlinksOff, true
		case a.Value == "on":
			lc.DisableSymlinks, modeSet = SymlinksOn, true
		case a.Value == "if_not_owner":
			lc.DisableSymlinks, modeSet = SymlinksIfNotOwner, true
		case strings.HasPrefix(a.Value, "from="):
			t, err := CompileTemplate(a.Value[len("from="):])
			if err != nil {
				return s.InvalidValue(a, err.Error())
			}
			if err := checkVars(c, s, a, t); err != nil {
				return err
			}
			lc.SymlinksFrom, fromSet = t, true
		default:
			return s.Errorf("invalid parameter %q", a.Value)
		}
	}
	if !modeSet {
		return s.Errorf(`%q must have "off", "on" or "if_not_owner" parameter`, s.Name)
	}
	if len(s.Args) == 2 && !fromSet {
		return s.Errorf("duplicate parameters \"%s %s\"", s.Args[0].Value, s.Args[1].Value)
	}
	if fromSet && lc.DisableSymlinks == SymlinksOff {
		return s.Errorf(`"from=" cannot be used with "off" parameter`)
	}
	return nil
}

func setOpenFileCache(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitOpenFileCache, s); err != nil {
		return err
	}
	spec := &CacheSpec{Inactive: 60 * time.Second}
	off := false
	for _, a := range s.Args {
		switch {
		case strings.HasPrefix(a.Value, "max="):
			n, err := conf.ParseNumber(a.Value[len("max="):])
			if err != nil || n <= 0 {
				return s.Errorf("invalid \"open_file_cache\" parameter %q", a.Value)
			}
			spec.Max = n
		case strings.HasPrefix(a.Value, "inactive="):
			d, err := parseSeconds(a.Value[len("inactive="):])
			if err != nil {
				return s.Errorf("invalid \"open_file_cache\" parameter %q", a.Value)
			}
			spec.Inactive = d
		case a.Value == "off":
			off = true
		default:
			return s.Errorf("invalid \"open_file_cache\" parameter %q", a.Value)
		}
	}
	if off {
		lc.OpenFileCache = nil
		return nil
	}
	if spec.Max == 0 {
		return s.Errorf(`"open_file_cache" must have the "max" parameter`)
	}
	lc.OpenFileCache = spec
	return nil
}

func setCacheMinUses(c *conf.Cursor, s *conf.Stmt) error {
	n, err := conf.ParseNumber(s.Args[0].Value)
	if err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	lc := locConf(c)
	lc.CacheMinUses = n
	lc.set |= bitCacheMinUses
	return nil
}

func setAutoindexFormat(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	switch s.Args[0].Value {
	case "html":
		lc.AutoindexFormat = FormatHTML
	case "json":
		lc.AutoindexFormat = FormatJSON
	case "jsonp":
		lc.AutoindexFormat = FormatJSONP
	case "xml":
		lc.AutoindexFormat = FormatXML
	default:
		return s.InvalidValue(s.Args[0], `it must be "html", "json", "jsonp" or "xml"`)
	}
	lc.set |= bitAutoindexFormat
	return nil
}

// setAIO takes aio off only: numaproxy reads files on the loop, and a value that
// would move reads off it (threads, or file AIO) cannot be honoured.
func setAIO(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitAIO, s); err != nil {
		return err
	}
	v := s.Args[0].Value
	switch {
	case v == "off":
	case v == "on":
		return s.Errorf(`"aio on" is unsupported on this platform`)
	case v == "threads" || strings.HasPrefix(v, "threads="):
		return s.Errorf(`"aio %s" is not supported: numaproxy reads files on its event loops (sendfile or pread), as nginx with aio off`, v)
	default:
		return s.InvalidValue(s.Args[0], "")
	}
	return nil
}

// setDirectIO takes directio off only: O_DIRECT files need aligned reads outside
// the page cache, which the loop's file sending (sendfile, pread into pool
// buffers) does not do.
func setDirectIO(c *conf.Cursor, s *conf.Stmt) error {
	lc := locConf(c)
	if err := duplicate(lc, bitDirectIO, s); err != nil {
		return err
	}
	if s.Args[0].Value == "off" {
		lc.DirectIO = DirectIOOff
		return nil
	}
	if _, err := conf.ParseSize(s.Args[0].Value); err != nil {
		return s.InvalidValue(s.Args[0], "")
	}
	return s.Errorf(`"directio %s" is not supported: numaproxy sends files through the page cache (sendfile or pread), as nginx with directio off`, s.Args[0].Value)
}

// check gives every level without a root nginx's default, html under the prefix (the
// merge could not: it does not know the prefix), and refuses a charset that would
// need recoding.
func check(cfg *conf.Config, self *conf.Module) error {
	if cfg.HTTP == nil {
		return nil
	}
	def := []byte(cfg.Prefix + "/html")
	fill := func(lc *LocConf, pos conf.Pos) error {
		if lc.Root == nil && lc.RootTmpl == nil {
			lc.Root = def
		}
		lc.captures = usesCaptures(lc)
		if lc.prefix == "" {
			lc.prefix = cfg.Prefix
		}
		if lc.Charset != "" && lc.SourceCharset != "" && !equalFold(lc.Charset, lc.SourceCharset) {
			return &conf.Error{Pos: pos, Msg: fmt.Sprintf("no \"charset_map\" between the charsets %q and %q", lc.SourceCharset, lc.Charset)}
		}
		return nil
	}
	if err := fill(cfg.HTTP.Conf(self).(*LocConf), cfg.HTTP.Pos); err != nil {
		return err
	}
	var walk func(locs []*conf.Location) error
	walk = func(locs []*conf.Location) error {
		for _, l := range locs {
			if err := fill(l.Conf(self).(*LocConf), l.Pos); err != nil {
				return err
			}
			if err := walk(l.Locations); err != nil {
				return err
			}
		}
		return nil
	}
	for _, srv := range cfg.HTTP.Servers {
		if err := fill(srv.Conf(self).(*LocConf), srv.Pos); err != nil {
			return err
		}
		if err := walk(srv.Locations); err != nil {
			return err
		}
	}
	return nil
}

// usesCaptures reports a level whose file templates name regex captures.
func usesCaptures(lc *LocConf) bool {
	has := func(t *Template) bool {
		if t == nil {
			return false
		}
		for _, n := range t.VarNames() {
			if isCapture(n) {
				return true
			}
		}
		return false
	}
	if has(lc.RootTmpl) || has(lc.SymlinksFrom) {
		return true
	}
	for _, t := range lc.Index {
		if has(t) {
			return true
		}
	}
	for _, tf := range lc.TryFiles {
		if has(tf.Name) {
			return true
		}
	}
	return false
}
