package authbasic

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
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
		{Name: "auth_basic", Contexts: hsl, Args: conf.Args1, Set: setRealm,
			Syntax: "auth_basic string | off;", Default: "off",
			Doc: "Asks for a user name and password (HTTP Basic authentication) checked against auth_basic_user_file; string is the realm of the WWW-Authenticate challenge."},
		{Name: "auth_basic_user_file", Contexts: hsl, Args: conf.Args1, Set: setUserFile,
			Syntax: "auth_basic_user_file file;",
			Doc:    "The htpasswd file (user:password[:comment] lines) auth_basic checks against, relative to the configuration's folder. It is read at reload, and again when a check (at most once a second, off the event loops) finds it changed."},
	}
}

// LocConf is the module's configuration at one level (http, server or location),
// after inheritance.
type LocConf struct {
	Realm     string    // the realm as written ("off" turns it off)
	File      *UserFile // nil: not set
	Challenge []byte    // the WWW-Authenticate value for Realm
	realmSet  bool
}

// Enabled reports whether requests here must authenticate: auth_basic with a realm
// other than "off", and a user file.
func (lc *LocConf) Enabled() bool {
	return lc != nil && lc.realmSet && lc.Realm != "off" && lc.File != nil
}

// inherit fills what this level does not set from the level above; realm and file
// inherit separately, as in nginx.
func (lc *LocConf) inherit(p *LocConf) {
	if !lc.realmSet {
		lc.Realm, lc.Challenge, lc.realmSet = p.Realm, p.Challenge, p.realmSet
	}
	if lc.File == nil {
		lc.File = p.File
	}
}

// MainConf holds the snapshot's user files, one per path whichever locations name it.
type MainConf struct {
	files map[string]*UserFile
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
	if err := literal(s, v); err != nil {
		return err
	}
	// nginx copies the realm into the header as it is: a quote or backslash in it
	// makes a header clients read their own way. A line break would end the header.
	if strings.ContainsAny(v, "\r\n\x00") {
		return s.InvalidValue(s.Args[0], "a line break or NUL byte would split the WWW-Authenticate header")
	}
	lc.Realm, lc.realmSet = v, true
	if v != "off" {
		lc.Challenge = AppendChallenge(nil, v)
	}
	return nil
}

func setUserFile(c *conf.Cursor, s *conf.Stmt) error {
	lc := c.HTTPConf().(*LocConf)
	v := s.Args[0].Value
	if err := literal(s, v); err != nil {
		return err
	}
	if v == "" {
		return s.InvalidValue(s.Args[0], "empty file name")
	}
	// Relative to the configuration's folder (nginx's conf_prefix), joined without
	// cleaning as nginx does.
	if !filepath.IsAbs(v) {
		v = strings.TrimSuffix(filepath.Dir(c.Config.File), "/") + "/" + v
	}
	m := c.MainConf().(*MainConf)
	f := m.files[v]
	if f == nil {
		f = &UserFile{Path: v}
		m.files[v] = f
	}
	lc.File = f
	return nil
}

// literal refuses variables, which nginx allows in both directives and numaproxy
// does not evaluate here yet. A "$" that starts no variable is an error in nginx too.
func literal(s *conf.Stmt, v string) error {
	if strings.IndexByte(v, '$') >= 0 {
		return s.InvalidValue(s.Args[0], "variables are not supported in this directive yet")
	}
	return nil
}
