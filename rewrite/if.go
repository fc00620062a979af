package rewrite

import (
	"bytes"
	"strings"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore"
	"github.com/numaproxy/numaproxy/pcre"
)

// condOp is an if condition's operator.
type condOp uint8

const (
	condVar condOp = iota // a variable alone: true unless empty or "0"
	condEqual
	condNotEqual
	condRegex // ~ and ~*; negate for !~ and !~*
	condFile
	condNotFile
	condDir
	condNotDir
	condExists
	condNotExists
	condExec
	condNotExec
)

// ifOp is an if block: its condition, its directives, and in a location its
// implicit location.
type ifOp struct {
	op     condOp
	left   *httpcore.Template // the variable, or the file's path
	right  *httpcore.Template // the value of = and !=
	re     *pcre.Regexp
	negate bool
	loc    *conf.Location // nil in a server
	body   []op
}

func setIf(c *conf.Cursor, s *conf.Stmt) error {
	cond, err := parseCondition(c, s)
	if err != nil {
		return err
	}
	loc, inner, err := c.ParseIf(s)
	if err != nil {
		return err
	}
	// The block's directives run in the enclosing level's sequence, as nginx
	// compiles them into its codes; the block's own level keeps none.
	ilc := inner.(*LocConf)
	cond.body, ilc.ops = ilc.ops, nil
	cond.loc = loc
	addOp(c, op{kind: opIf, cond: cond})
	return nil
}

// parseCondition reads "(" condition ")" from the arguments as nginx's
// ngx_http_rewrite_if_condition: the parentheses may stand alone or touch the
// first and last words.
func parseCondition(c *conf.Cursor, s *conf.Stmt) (*ifOp, error) {
	args := append([]conf.Token(nil), s.Args...)
	first, last := &args[0], &args[len(args)-1]
	if !strings.HasPrefix(first.Value, "(") {
		return nil, invalidCondition(*first)
	}
	if first.Value == "(" {
		args = args[1:]
	} else {
		first.Value = first.Value[1:]
	}
	if len(args) == 0 {
		return nil, invalidCondition(s.Args[0])
	}
	last = &args[len(args)-1]
	if !strings.HasSuffix(last.Value, ")") {
		return nil, invalidCondition(*last)
	}
	if last.Value == ")" {
		args = args[:len(args)-1]
	} else {
		last.Value = last.Value[:len(last.Value)-1]
	}
	if len(args) == 0 {
		return nil, invalidCondition(s.Args[0])
	}
	compile := func(t conf.Token) (*httpcore.Template, error) {
		tmpl, err := httpcore.CompileTemplate(c, t.Value)
		if err != nil {
			return nil, &conf.Error{Pos: t.Pos, Msg: err.Error()}
		}
		return tmpl, nil
	}
	cur := args[0]
	if len(cur.Value) > 1 && cur.Value[0] == '$' {
		if len(args) != 1 && len(args) != 3 {
			return nil, invalidCondition(cur)
		}
		left, err := compile(cur)
		if err != nil {
			return nil, err
		}
		cond := &ifOp{op: condVar, left: left}
		if len(args) == 1 {
			return cond, nil
		}
		operator, value := args[1].Value, args[2]
		switch operator {
		case "=", "!=":
			cond.op = condEqual
			if operator == "!=" {
				cond.op = condNotEqual
			}
			if cond.right, err = compile(value); err != nil {
				return nil, err
			}
			return cond, nil
		case "~", "~*", "!~", "!~*":
			cond.op, cond.negate = condRegex, operator[0] == '!'
			if cond.re, err = conf.CompileRegex(value, strings.HasSuffix(operator, "*")); err != nil {
				return nil, err
			}
			if err := addRegex(c, cond.re, s); err != nil {
				return nil, err
			}
			return cond, nil
		}
		return nil, &conf.Error{Pos: args[1].Pos, Msg: "unexpected \"" + operator + "\" in condition"}
	}
	fileOps := map[string]condOp{"-f": condFile, "!-f": condNotFile, "-d": condDir, "!-d": condNotDir,
		"-e": condExists, "!-e": condNotExists, "-x": condExec, "!-x": condNotExec}
	if op, ok := fileOps[cur.Value]; ok {
		if len(args) != 2 {
			return nil, invalidCondition(cur)
		}
		path, err := compile(args[1])
		if err != nil {
			return nil, err
		}
		return &ifOp{op: op, left: path}, nil
	}
	return nil, invalidCondition(cur)
}

func invalidCondition(t conf.Token) error {
	return &conf.Error{Pos: t.Pos, Msg: "invalid condition \"" + t.Value + "\""}
}

// holds evaluates the condition for r.
func (c *ifOp) holds(r *httpcore.Request, st *loopState, lc *LocConf) bool {
	left := c.left.Append(st.a[:0], r)
	st.a = left[:0]
	switch c.op {
	case condVar:
		return !(len(left) == 0 || len(left) == 1 && left[0] == '0')
	case condEqual, condNotEqual:
		right := c.right.Append(st.b[:0], r)
		st.b = right[:0]
		return bytes.Equal(left, right) == (c.op == condEqual)
	case condRegex:
		ok := r.Regex(c.re, left)
		if lc.Log {
			verb := "\" matches \""
			if !ok {
				verb = "\" does not match \""
			}
			notice(r, "\""+c.re.String()+verb+string(left)+"\"")
		}
		if !ok {
			r.ClearCaptures()
		}
		return ok != c.negate
	}
	return fileTest(c.op, left)
}
