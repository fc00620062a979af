package conf

import (
	"fmt"
	"github.com/numaproxy/numaproxy/errorlog"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// include reads the files an include directive names, in the directive's context.
//
// A relative name resolves against the including file's folder; when nothing is
// found there it falls back to the main file's folder, which is what nginx uses, so
// nginx layouts (sites-enabled/x including snippets/y) keep working. A glob that
// matches nothing is not an error (as in nginx); a plain name that does not exist is.
func (p *parser) include(c *Cursor, s *Stmt) error {
	name := s.Args[0].Value
	glob := strings.ContainsAny(name, "*?[")
	var candidates []string
	if filepath.IsAbs(name) {
		candidates = []string{name}
	} else {
		base := p.cfg.Prefix
		if s.Pos.File != "" {
			base = filepath.Dir(s.Pos.File)
		}
		candidates = []string{filepath.Join(base, name)}
		if fallback := filepath.Join(p.mainDir, name); fallback != candidates[0] {
			candidates = append(candidates, fallback)
		}
	}

	var files []string
	for _, path := range candidates {
		if glob {
			matches, err := filepath.Glob(path)
			if err != nil {
				return s.InvalidValue(s.Args[0], err.Error())
			}
			for _, m := range matches {
				if st, err := os.Stat(m); err == nil && !st.IsDir() {
					files = append(files, m)
				}
			}
		} else if _, err := os.Stat(path); err == nil {
			files = []string{path}
		}
		if len(files) > 0 {
			break
		}
	}
	if len(files) == 0 && !glob {
		_, err := os.Stat(candidates[0])
		return &Error{Pos: s.Pos, Msg: fmt.Sprintf("open() %q failed %s", candidates[0], errorlog.Errno(err)), Err: err}
	}
	sort.Strings(files)
	for _, f := range files {
		if err := p.readFile(c, f, s.Pos); err != nil {
			return err
		}
	}
	return nil
}
