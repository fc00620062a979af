package conf

import (
	"reflect"
	"strings"
	"testing"
)

// lexAll reads every statement of src, rendering each as its words joined by "|"
// followed by how it ended: ";" "{" "}".
func lexAll(src string) ([]string, error) {
	lx := newLexer("t.conf", []byte(src))
	var out []string
	for {
		args, term, err := lx.next()
		if err != nil {
			return out, err
		}
		var words []string
		for _, a := range args {
			words = append(words, a.Value)
		}
		line := strings.Join(words, "|")
		switch term {
		case endFile:
			return out, nil
		case endSemicolon:
			line += ";"
		case endBlockStart:
			line += "{"
		case endBlockEnd:
			line += "}"
		}
		out = append(out, line)
	}
}

func TestLexer(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
		err  string // substring of the error, "" for none
	}{
		{name: "simple", src: "a b c;", want: []string{"a|b|c;"}},
		{name: "block", src: "http { server { listen 80; } }", want: []string{"http{", "server{", "listen|80;", "}", "}"}},
		{name: "no space before ;", src: "a b;c d;", want: []string{"a|b;", "c|d;"}},
		{name: "no space before {", src: "a b{}", want: []string{"a|b{", "}"}},
		{name: "newlines and tabs", src: "a\n\tb\r\n c\n;", want: []string{"a|b|c;"}},
		{name: "double quotes", src: `a "b c" d;`, want: []string{"a|b c|d;"}},
		{name: "single quotes", src: `a 'b "c"';`, want: []string{`a|b "c";`}},
		{name: "quote then semicolon", src: `a "b";`, want: []string{"a|b;"}},
		{name: "quote then brace", src: `a "b"{}`, want: []string{"a|b{", "}"}},
		{name: "empty quotes", src: `a "";`, want: []string{"a|;"}},
		{name: "escaped quote in double", src: `a "b\"c";`, want: []string{`a|b"c;`}},
		{name: "escaped quote in single", src: `a 'b\'c';`, want: []string{`a|b'c;`}},
		{name: "escaped backslash", src: `a "b\\c";`, want: []string{`a|b\c;`}},
		{name: "escaped tab newline cr", src: `a "x\ty\nz\rw";`, want: []string{"a|x\ty\nz\rw;"}},
		{name: "other escapes kept", src: `a "\d+\.x";`, want: []string{`a|\d+\.x;`}},
		{name: "escape in bare word", src: `a b\;c;`, want: []string{`a|b\;c;`}},
		{name: "escaped space joins words", src: `a b\ c;`, want: []string{`a|b\ c;`}},
		{name: "quote inside word is literal", src: `a b"c;`, want: []string{`a|b"c;`}},
		{name: "variable braces stay in word", src: `a ${x}y;`, want: []string{"a|${x}y;"}},
		{name: "variable braces mid word", src: `a pre${x}post;`, want: []string{"a|pre${x}post;"}},
		{name: "brace after variable in quotes", src: `a "${x}";`, want: []string{"a|${x};"}},
		{name: "brace inside word is literal", src: `a b}c;`, want: []string{"a|b}c;"}},
		{name: "comment line", src: "# x ; {\na b;", want: []string{"a|b;"}},
		{name: "comment after statement", src: "a b; # c d;\ne f;", want: []string{"a|b;", "e|f;"}},
		{name: "hash inside word", src: "a b#c;", want: []string{"a|b#c;"}},
		{name: "hash in quotes", src: `a "#b";`, want: []string{"a|#b;"}},
		{name: "comment at end of file without newline", src: "a b;\n# the end", want: []string{"a|b;"}},
		{name: "empty file", src: "", want: nil},
		{name: "only comments and space", src: "  # a\n\n# b\n", want: nil},

		{name: "unterminated double quote", src: `a "b;`, err: `unexpected end of file, expecting ";" or "}" in t.conf:1`},
		{name: "unterminated single quote", src: "a 'b;\n", err: `unexpected end of file`},
		{name: "missing semicolon at end", src: "a b", err: `unexpected end of file, expecting ";" or "}" in t.conf:1`},
		{name: "brace with pending arguments", src: "a b }", err: `unexpected "}" in t.conf:1`},
		{name: "semicolon alone", src: "a;\n;", err: `unexpected ";" in t.conf:2`},
		{name: "open brace alone", src: "{", err: `unexpected "{" in t.conf:1`},
		{name: "text right after quote", src: `a "b"c;`, err: `unexpected "c" in t.conf:1`},
		{name: "error line counts newlines in quotes", src: "a \"b\nc\"x;", err: `unexpected "x" in t.conf:2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lexAll(tt.src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLexerPositions(t *testing.T) {
	lx := newLexer("f", []byte("a\n  b\n\n'c\nd' e;"))
	args, _, err := lx.next()
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, a := range args {
		lines = append(lines, a.Pos.Line)
	}
	if want := []int{1, 2, 4, 5}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("token lines %v, want %v", lines, want)
	}
	if args[2].Quoted != true || args[1].Quoted != false {
		t.Fatalf("quoted flags wrong: %+v", args)
	}
}

func TestLexerCommandLine(t *testing.T) {
	lx := newLexer("", []byte("pid x"))
	_, _, err := lx.next()
	if err == nil || err.Error() != `unexpected end of parameter, expecting ";" in command line` {
		t.Fatalf("got %v", err)
	}
}
