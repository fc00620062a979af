package authbasic

import (
	"bytes"
	"fmt"
	"strconv"
)

// maxField is where nginx cuts a password field: its 2048-byte read buffer fills up
// and it takes what it holds.
const maxField = 2048

// Table is one reading of an htpasswd file: for each user, the password field nginx
// would find for it. It is built once and never changed, so any number of loops may
// read it at once.
type Table struct {
	users map[string]*Hash
	raw   []byte // the file, for users with a line feed in their name
}

// Warning is a line of the file that does not do what it seems to.
type Warning struct {
	Line int
	Msg  string
}

func (w Warning) String() string { return "line " + strconv.Itoa(w.Line) + ": " + w.Msg }

// ParseTable reads an htpasswd file with nginx's rules, so that Lookup finds what
// nginx's per-request scan finds:
//
//   - a line is "user:password", optionally followed by ":comment"; the password
//     ends at the next ':', CR or LF, and at 2048 bytes;
//   - empty lines and lines that start with '#' or CR are skipped;
//   - the first line for a user counts;
//   - a line without ':' whose text starts the user's name (or is all of it) makes
//     nginx skip the line after it when it looks for that user: nginx's scanner
//     consumes the line feed as a mismatch. ParseTable finds the same lines;
//   - a user's name is compared byte by byte, case included.
//
// Warnings list the lines nobody can log in with and why.
func ParseTable(data []byte) (*Table, []Warning) {
	t := &Table{users: map[string]*Hash{}, raw: data}
	var warns []Warning
	var run [][]byte // consecutive lines without ':' just before this one (others end the run)
	firstLine := map[string]int{}
	line := 0
	for rest := data; len(rest) > 0; {
		line++
		var l []byte
		terminated := false
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l, rest, terminated = rest[:i], rest[i+1:], true
		} else {
			l, rest = rest, nil
		}
		if len(l) == 0 || l[0] == '#' || l[0] == '\r' {
			run = run[:0]
			continue
		}
		colon := bytes.IndexByte(l, ':')
		if colon < 0 {
			if terminated {
				run = append(run, l)
			}
			warns = append(warns, Warning{line, fmt.Sprintf("no ':' in %q: ignored (and nginx skips the next line for users whose name starts with it)", l)})
			continue
		}
		user := l[:colon]
		prev := run
		run = run[:0]
		if colon == 0 {
			warns = append(warns, Warning{line, "empty user name: ignored"})
			continue
		}
		// Lines without ':' that start this user's name, counted back from this
		// line: the first of them makes nginx skip the next, which then cannot
		// skip its own next, and so on. An odd count hides this line.
		n := 0
		for j := len(prev) - 1; j >= 0 && bytes.HasPrefix(user, prev[j]); j-- {
			n++
		}
		if n%2 == 1 {
			warns = append(warns, Warning{line, fmt.Sprintf("user %q: nginx skips this line after line %d, which has no ':'", user, line-1)})
			continue
		}
		if first, dup := firstLine[string(user)]; dup {
			warns = append(warns, Warning{line, fmt.Sprintf("user %q is on line %d already: ignored", user, first)})
			continue
		}
		h := ParseHash(passwordField(l[colon+1:]))
		t.users[string(user)] = h
		firstLine[string(user)] = line
		if h.problem != "" {
			warns = append(warns, Warning{line, fmt.Sprintf("user %q: %s", user, h.problem)})
		}
	}
	return t, warns
}

// passwordField cuts a line's text after "user:" where nginx ends the password.
func passwordField(f []byte) []byte {
	if i := bytes.IndexAny(f, ":\r"); i >= 0 {
		f = f[:i]
	}
	return f[:min(len(f), maxField)]
}

// Lookup returns the password hash of user, or nil when nginx would not find the user.
func (t *Table) Lookup(user []byte) *Hash {
	if bytes.IndexByte(user, '\n') >= 0 {
		// nginx's scan matches such a name across lines; so does scanFile.
		if f, ok := scanFile(t.raw, user); ok {
			return ParseHash(f)
		}
		return nil
	}
	return t.users[string(user)]
}

// Len is the number of users.
func (t *Table) Len() int { return len(t.users) }

// scanFile is nginx 1.22's ngx_http_auth_basic_handler scan, 2048-byte reads
// included: it returns the password field of user, or false.
func scanFile(data, user []byte) ([]byte, bool) {
	const (
		swLogin = iota
		swPasswd
		swSkip
	)
	var buf [maxField]byte
	state, login, passwd, left, offset := swLogin, 0, 0, 0, 0
	for {
		n := copy(buf[left:], data[offset:])
		if n == 0 {
			break
		}
		for i := left; i < left+n; i++ {
			c := buf[i]
			switch state {
			case swLogin:
				if login == 0 {
					if c == '#' || c == '\r' {
						state = swSkip
						continue
					}
					if c == '\n' {
						continue
					}
				}
				want := byte(':') // nginx's buffer holds "user:password"
				if login < len(user) {
					want = user[login]
				}
				if c != want {
					state = swSkip
					continue
				}
				if login == len(user) {
					state, passwd = swPasswd, i+1
				}
				login++
			case swPasswd:
				if c == '\n' || c == '\r' || c == ':' {
					return bytes.Clone(buf[passwd:i]), true
				}
			case swSkip:
				if c == '\n' {
					state, login = swLogin, 0
				}
			}
		}
		if state == swPasswd {
			left = left + n - passwd
			copy(buf[:], buf[passwd:passwd+left])
			passwd = 0
		} else {
			left = 0
		}
		offset += n
	}
	if state == swPasswd {
		return bytes.Clone(buf[passwd:left]), true
	}
	return nil, false
}
