package conf

import (
	"fmt"
	"github.com/numaproxy/numaproxy/errorlog"
	"io"
	"os"
	"path/filepath"
)

// Options says what to load.
type Options struct {
	Registry   *Registry
	Prefix     string // the -p prefix; "" means the working directory
	File       string // the main file; relative to Prefix unless absolute
	Directives string // -g: extra main-context directives, parsed before the file
}

// Stmt is one directive as written: its name, arguments and where it starts.
type Stmt struct {
	Name string
	Args []Token
	Pos  Pos
}

// Errorf makes an error positioned at the directive.
func (s *Stmt) Errorf(format string, args ...any) error {
	return errorf(s.Pos, format, args...)
}

// InvalidValue is nginx's `invalid value "x" in "name" directive`, positioned at the
// argument, with an optional reason after a comma.
func (s *Stmt) InvalidValue(arg Token, reason string) error {
	msg := fmt.Sprintf("invalid value %q in %q directive", arg.Value, s.Name)
	if reason != "" {
		msg += ", " + reason
	}
	return &Error{Pos: arg.Pos, Msg: msg}
}

// Cursor is where a directive stands while it is being set: the context, the blocks
// around it and the config it writes into. Directive Set functions receive one.
type Cursor struct {
	Ctx      Context
	Config   *Config   // the snapshot under construction
	HTTP     *HTTP     // inside http { }
	Server   *Server   // inside server { }
	Location *Location // inside location { } (the innermost)
	Block    any       // a module-defined block's object (for example an upstream)

	p      *parser
	lx     *lexer
	confs  moduleConfs                    // the http-level module configs of this level
	module *Module                        // the module whose directive is being set
	seen   map[string]bool                // directives already set in this block
	raw    func(c *Cursor, s *Stmt) error // set inside a ParseRawBlock block
}

// HTTPConf returns the calling directive's module config at this http level (http,
// server or location), created by its Module.NewHTTP.
func (c *Cursor) HTTPConf() any { return c.confs.get(c.module) }

// HTTPConfOf returns module m's config at this http level: a directive of one module
// may set another's, as nginx's proxy_pass sets the core's content handler.
func (c *Cursor) HTTPConfOf(m *Module) any { return c.confs.get(m) }

// MainConf returns the calling directive's module config for the whole snapshot.
func (c *Cursor) MainConf() any { return c.p.cfg.mains[c.module] }

// Pos is where the parser stands: the end of the directive being set.
func (c *Cursor) Pos() Pos {
	if c.lx == nil {
		return Pos{}
	}
	return c.lx.pos()
}

// Path resolves a file name from the configuration against the prefix, as nginx does.
func (c *Cursor) Path(name string) string { return c.p.path(name) }

// Warn records a warning that does not stop the load.
func (c *Cursor) Warn(pos Pos, format string, args ...any) {
	c.p.cfg.Warnings = append(c.p.cfg.Warnings, errorf(pos, format, args...))
}

// ParseBlock parses the { } that follows the current directive in context ctx; block
// is what Cursor.Block holds for the directives inside.
func (c *Cursor) ParseBlock(ctx Context, block any) error {
	child := *c
	child.Ctx, child.Block, child.seen = ctx, block, map[string]bool{}
	return c.p.parseBlock(&child, true)
}

// ParseRawBlock parses the { } that follows the current directive without the
// registry: each statement inside is handed to handle as written, its first word as
// the name, as nginx's cf->handler does for blocks such as types { } and map { }.
// "include file;" inside reads the file the same way; a nested "{" is an error.
func (c *Cursor) ParseRawBlock(handle func(c *Cursor, s *Stmt) error) error {
	child := *c
	child.raw, child.seen = handle, map[string]bool{}
	return c.p.parseBlock(&child, true)
}

// parseHTTPBlock is ParseBlock for the http-level blocks, which also get a fresh set
// of module configs.
func (c *Cursor) parseHTTPBlock(ctx Context, confs moduleConfs) error {
	child := *c
	child.Ctx, child.Block, child.seen, child.confs = ctx, nil, map[string]bool{}, confs
	return c.p.parseBlock(&child, true)
}

type parser struct {
	reg      *Registry
	cfg      *Config
	mainDir  string   // folder of the main file: includes fall back to it, as in nginx
	includes []string // files being read, outermost first (for cycle detection)
}

// Load reads, validates and returns a configuration snapshot. Every error is an
// *Error naming the file and line that caused it.
func Load(opts Options) (*Config, error) {
	file, err := MainFile(opts.Prefix, opts.File)
	if err != nil {
		return nil, err
	}
	prefix, err := MainFile(opts.Prefix, ".")
	if err != nil {
		return nil, err
	}
	cfg := &Config{File: file, Prefix: prefix, registry: opts.Registry, mains: map[*Module]any{}}
	for _, m := range opts.Registry.modules {
		if m.NewMain != nil {
			cfg.mains[m] = m.NewMain()
		}
	}
	p := &parser{reg: opts.Registry, cfg: cfg, mainDir: filepath.Dir(file)}
	top := &Cursor{Ctx: MainCtx, Config: cfg, p: p, seen: map[string]bool{}}
	initMain(cfg)

	if opts.Directives != "" {
		cl := *top
		cl.lx = newLexer("", []byte(opts.Directives))
		if err := p.parseBlock(&cl, false); err != nil {
			return nil, err
		}
	}
	if err := p.readFile(top, file, Pos{}); err != nil {
		return nil, err
	}
	if err := finish(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (p *parser) path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(p.cfg.Prefix, name)
}

// readFile parses one whole file in the cursor's context.
func (p *parser) readFile(c *Cursor, file string, from Pos) error {
	for _, open := range p.includes {
		if open == file {
			return errorf(from, "include cycle: %q includes itself", file)
		}
	}
	src, err := readRegularFile(file)
	if err != nil {
		return &Error{Pos: from, Msg: fmt.Sprintf("open() %q failed %s", file, errorlog.Errno(err)), Err: err}
	}
	p.cfg.Sources = append(p.cfg.Sources, SourceFile{Name: file, Content: src})
	p.includes = append(p.includes, file)
	defer func() { p.includes = p.includes[:len(p.includes)-1] }()
	fc := *c
	fc.lx = newLexer(file, src)
	return p.parseBlock(&fc, false)
}

// parseBlock reads statements until the block's "}" (inBlock) or the end of input.
func (p *parser) parseBlock(c *Cursor, inBlock bool) error {
	for {
		args, term, err := c.lx.next()
		if err != nil {
			return err
		}
		switch term {
		case endFile:
			if inBlock {
				return errorf(c.lx.pos(), `unexpected end of file, expecting "}"`)
			}
			return nil
		case endBlockEnd:
			if !inBlock {
				return errorf(c.lx.pos(), `unexpected "}"`)
			}
			return nil
		}
		if err := p.handle(c, args, term); err != nil {
			return err
		}
	}
}

// handle looks a statement up in the registry, checks its form and sets it.
func (p *parser) handle(c *Cursor, args []Token, term terminator) error {
	s := &Stmt{Name: args[0].Value, Args: args[1:], Pos: args[0].Pos}
	if c.raw != nil {
		return p.handleRaw(c, s, term)
	}
	reg, known := p.reg.lookup(s.Name, c.Ctx)
	if reg == nil {
		if known {
			return s.Errorf("%q directive is not allowed here", s.Name)
		}
		return s.Errorf("unknown directive %q", s.Name)
	}
	d := reg.d
	if d.Block && term != endBlockStart {
		return s.Errorf("directive %q has no opening \"{\"", s.Name)
	}
	if !d.Block && term == endBlockStart {
		return s.Errorf("directive %q is not terminated by \";\"", s.Name)
	}
	if !d.Args.accepts(len(s.Args)) {
		return s.Errorf("invalid number of arguments in %q directive", s.Name)
	}
	if d.Args&Flag != 0 {
		if _, err := ParseFlag(s.Args[0].Value); err != nil {
			return s.InvalidValue(s.Args[0], `it must be "on" or "off"`)
		}
	}
	if !d.Multi {
		if c.seen[s.Name] {
			return s.Errorf("%q directive is duplicate", s.Name)
		}
		c.seen[s.Name] = true
	}
	c.module = reg.m
	return at(s.Pos, d.Set(c, s))
}

// handleRaw hands a statement of a ParseRawBlock block to its handler.
func (p *parser) handleRaw(c *Cursor, s *Stmt, term terminator) error {
	if term == endBlockStart {
		return s.Errorf(`unexpected "{"`)
	}
	if s.Name == "include" {
		if len(s.Args) != 1 {
			return s.Errorf(`invalid number of arguments in "include" directive`)
		}
		return p.include(c, s)
	}
	return at(s.Pos, c.raw(c, s))
}

// maxFileSize bounds one configuration file; anything larger is a mistake.
const maxFileSize = 16 << 20

// readRegularFile reads a configuration file, refusing devices, fifos and huge files
// that would block or exhaust memory (an include of /dev/zero, say).
func readRegularFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("larger than %d MiB", maxFileSize>>20)
	}
	return io.ReadAll(io.LimitReader(f, maxFileSize+1))
}
