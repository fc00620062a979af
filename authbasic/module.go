package authbasic

import (
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
)

// Module declares nginx's ngx_http_auth_basic_module directives; its Ctx (http.go)
// puts the check in the HTTP core's access phase.
var Module = &conf.Module{
	Name:       "auth_basic",
	Directives: directives(),
	NewMain:    func() any { return &MainConf{files: map[string]*UserFile{}} },
	NewHTTP:    func() any { return &LocConf{} },
	MergeHTTP:  func(parent, child any) error { child.(*LocConf).inherit(parent.(*LocConf)); return nil },
}

const hsl = conf.HTTPCtx | conf.ServerCtx | conf.LocationCtx

func directives() []conf.Directive {
	return []conf.Directive{
		{Name: "auth_basic", Contexts: hsl | conf.LmtCtx, Args: conf.Args1, Set: setRealm,
			Syntax: "auth_basic string | off;", Default: "off",
			Doc: "Asks for a user name and password (HTTP Basic authentication) checked against auth_basic_user_file; string is the realm of the WWW-Authenticate challenge. Variables allowed (a realm that comes out \"off\" turns the check off)."},
		{Name: "auth_basic_user_file", Contexts: hsl | conf.LmtCtx, Args: conf.Args1, Set: setUserFile,
			Syntax: "auth_basic_user_file file;",
			Doc:    "The htpasswd file (user:password[:comment] lines) auth_basic checks against, relative to the configuration's folder; variables allowed (at most 1024 files a configuration). It is read at reload (or first use), and again when a check (at most once a second, off the event loops) finds it changed."},
	}
}

// LocConf is the module's configuration at one level (http, server or location),
// after inheritance.
type LocConf struct {
	Realm     string    // the realm as written ("off" turns it off)
	File      *UserFile // nil: not set
	Challenge []byte    // the WWW-Authenticate value for Realm
	// RealmVar and FileVar are auth_basic and auth_basic_user_file when they name
	// variables: evaluated per request (a realm that comes out "off" turns the
	// check off; a relative path is taken from fileDir, the configuration's folder).
	RealmVar *httpcore.Template
	FileVar  *httpcore.Template
	fileDir  string
	realmSet bool
}

// Enabled reports whether requests here must authenticate: auth_basic with a realm
// other than "off", and a user file.
func (lc *LocConf) Enabled() bool {
	return lc != nil && lc.realmSet && (lc.RealmVar != nil || lc.Realm != "off") && (lc.File != nil || lc.FileVar != nil)
}

// inherit fills what this level does not set from the level above; realm and file
// inherit separately, as in nginx.
func (lc *LocConf) inherit(p *LocConf) {
	if !lc.realmSet {
		lc.Realm, lc.Challenge, lc.RealmVar, lc.realmSet = p.Realm, p.Challenge, p.RealmVar, p.realmSet
	}
	if lc.File == nil && lc.FileVar == nil {
		lc.File, lc.FileVar, lc.fileDir = p.File, p.FileVar, p.fileDir
	}
}

// MainConf holds the snapshot's user files, one per path whichever locations name it,
// and those paths with variables made (dynamic, shared by the loops).
type MainConf struct {
	files   map[string]*UserFile
	dynMu   sync.Mutex
	dynamic map[string]*UserFile
}

// maxDynamicFiles bounds the user files that paths with variables may name in one
// snapshot: a path made from what clients send must not grow the process without
// end.
const maxDynamicFiles = 1024

// dynamicFile is the user file at path (made by a path with variables), nil once
// maxDynamicFiles are known. It does not allocate for a path seen before.
func (m *MainConf) dynamicFile(path []byte) *UserFile {
	m.dynMu.Lock()
	defer m.dynMu.Unlock()
	if f := m.files[string(path)]; f != nil {
		return f
	}
	if f := m.dynamic[string(path)]; f != nil {
		return f
	}
	if len(m.dynamic) >= maxDynamicFiles {
		return nil
	}
	if m.dynamic == nil {
		m.dynamic = map[string]*UserFile{}
	}
	f := &UserFile{Path: string(path)}
	m.dynamic[f.Path] = f
	return f
}

// Files lists the snapshot's user files, by path.
func (m *MainConf) Files() []*UserFile {
	out := make([]*UserFile, 0, len(m.files))
	for _, f := range m.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// MainConfOf returns the module's snapshot-wide configuration.
func MainConfOf(cfg *conf.Config) *MainConf { return cfg.MainConf(Module).(*MainConf) }

// ConfOf returns the module's configuration of a location (merged).
func ConfOf(l *conf.Location) *LocConf { return l.Conf(Module).(*LocConf) }

// ServerConf returns the module's configuration of a server, for requests no
// location takes.
func ServerConf(s *conf.Server) *LocConf { return s.Conf(Module).(*LocConf) }

func setRealm(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	v := s.Args[0].Value
	lc.realmSet, lc.RealmVar, lc.Realm, lc.Challenge = true, nil, v, nil
	if strings.IndexByte(v, '$') >= 0 {
		t, err := httpcore.CompileTemplate(c, v)
		if err != nil {
			return s.InvalidValue(s.Args[0], err.Error())
		}
		if !t.Static() {
			lc.RealmVar = t
			return nil
		}
	}
	// nginx copies the realm into the header as it is: a quote or backslash in it
	// makes a header clients read their own way. A line break would end the header.
	if strings.ContainsAny(v, "\r\n\x00") {
		return s.InvalidValue(s.Args[0], "a line break or NUL byte would split the WWW-Authenticate header")
	}
	if v != "off" {
		lc.Challenge = AppendChallenge(nil, v)
	}
	return nil
}

func setUserFile(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	v := s.Args[0].Value
	if v == "" {
		return s.InvalidValue(s.Args[0], "empty file name")
	}
	dir := strings.TrimSuffix(filepath.Dir(c.Config.File), "/") + "/"
	if strings.IndexByte(v, '$') >= 0 {
		t, err := httpcore.CompileTemplate(c, v)
		if err != nil {
			return s.InvalidValue(s.Args[0], err.Error())
		}
		if !t.Static() {
			lc.File, lc.FileVar, lc.fileDir = nil, t, dir
			return nil
		}
	}
	// Relative to the configuration's folder (nginx's conf_prefix), joined without
	// cleaning as nginx does.
	if !filepath.IsAbs(v) {
		v = dir + v
	}
	m := c.MainConf().(*MainConf)
	f := m.files[v]
	if f == nil {
		f = &UserFile{Path: v}
		m.files[v] = f
	}
	lc.File, lc.FileVar = f, nil
	return nil
}
