package conf

// The tokenizer follows nginx's ngx_conf_read_token: words are separated by white
// space, ';' and '{'; '}' ends a block only where a word could start; '#' starts a
// comment only where a word could start; quotes group, and a backslash makes the next
// character literal while scanning. Escapes are resolved when a word is cut.

// Token is one word of a directive, after quote and escape processing.
type Token struct {
	Value  string
	Pos    Pos
	Quoted bool // written in single or double quotes
}

// terminator says how a statement ended.
type terminator int

const (
	endSemicolon  terminator = iota // "name args;"
	endBlockStart                   // "name args {"
	endBlockEnd                     // "}"
	endFile                         // end of input with no pending words
)

// lexer reads statements from one file's contents.
type lexer struct {
	src  []byte
	file string // "" for the command line
	off  int
	line int
}

func newLexer(file string, src []byte) *lexer {
	return &lexer{src: src, file: file, line: 1}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// next reads one statement: its words and what ended it. The words of a block start
// ("server {") are returned with endBlockStart; a lone "}" with endBlockEnd.
func (lx *lexer) next() ([]Token, terminator, error) {
	var (
		args      []Token
		lastSpace = true  // between words: the next non-space starts one
		needSpace = false // just closed a quote: only space ; { may follow
		escaped   = false // previous char was a backslash
		dQuoted   = false
		sQuoted   = false
		comment   = false
		variable  = false // previous char was '$': "${" does not open a block
		start     int
		startLine int
	)
	for {
		if lx.off >= len(lx.src) {
			if len(args) > 0 || !lastSpace {
				if lx.file == "" {
					return nil, 0, errorf(lx.pos(), `unexpected end of parameter, expecting ";"`)
				}
				return nil, 0, errorf(lx.pos(), `unexpected end of file, expecting ";" or "}"`)
			}
			return nil, endFile, nil
		}
		ch := lx.src[lx.off]
		lx.off++
		if ch == '\n' {
			lx.line++
			if comment {
				comment = false
			}
		}
		if comment {
			continue
		}
		if escaped {
			escaped = false
			continue
		}
		if needSpace {
			switch {
			case isSpace(ch):
				lastSpace, needSpace = true, false
				continue
			case ch == ';':
				return args, endSemicolon, nil
			case ch == '{':
				return args, endBlockStart, nil
			case ch == ')':
				// nginx lets a quoted word end an if's condition: ($a = "b")
				// gives "(a", "=", "b", ")" here, the parenthesis a word of its own.
				args = append(args, Token{Value: ")", Pos: lx.pos()})
				lastSpace, needSpace = true, false
				continue
			default:
				return nil, 0, errorf(lx.pos(), `unexpected "%c"`, ch)
			}
		}
		if lastSpace {
			start, startLine = lx.off-1, lx.line
			if isSpace(ch) {
				continue
			}
			switch ch {
			case ';', '{':
				if len(args) == 0 {
					return nil, 0, errorf(lx.pos(), `unexpected "%c"`, ch)
				}
				if ch == '{' {
					return args, endBlockStart, nil
				}
				return args, endSemicolon, nil
			case '}':
				if len(args) != 0 {
					return nil, 0, errorf(lx.pos(), `unexpected "}"`)
				}
				return nil, endBlockEnd, nil
			case '#':
				comment = true
				continue
			case '\\':
				escaped = true
			case '"':
				start++
				dQuoted = true
			case '\'':
				start++
				sQuoted = true
			case '$':
				variable = true
			}
			lastSpace = false
			continue
		}
		if ch == '{' && variable {
			continue
		}
		variable = false
		found := false
		switch {
		case ch == '\\':
			escaped = true
			continue
		case ch == '$':
			variable = true
			continue
		case dQuoted:
			if ch == '"' {
				dQuoted, needSpace, found = false, true, true
			}
		case sQuoted:
			if ch == '\'' {
				sQuoted, needSpace, found = false, true, true
			}
		case isSpace(ch) || ch == ';' || ch == '{':
			lastSpace, found = true, true
		}
		if !found {
			continue
		}
		quoted := needSpace
		args = append(args, Token{
			Value:  unescape(lx.src[start : lx.off-1]),
			Pos:    Pos{File: lx.file, Line: startLine},
			Quoted: quoted,
		})
		switch ch {
		case ';':
			return args, endSemicolon, nil
		case '{':
			return args, endBlockStart, nil
		}
	}
}

func (lx *lexer) pos() Pos { return Pos{File: lx.file, Line: lx.line} }

// unescape resolves nginx's escapes: \" \' \\ become the character, \t \r \n the
// control character; any other backslash is kept as written.
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case '"', '\'', '\\':
				i++
			case 't':
				out = append(out, '\t')
				i++
				continue
			case 'r':
				out = append(out, '\r')
				i++
				continue
			case 'n':
				out = append(out, '\n')
				i++
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}
