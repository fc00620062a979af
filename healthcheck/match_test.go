package healthcheck

import (
	"testing"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore/http1"
)

func stmt(name string, args ...string) *conf.Stmt {
	s := &conf.Stmt{Name: name}
	for _, a := range args {
		s.Args = append(s.Args, conf.Token{Value: a})
	}
	return s
}

// TestMatchTests runs match's tests on one response, as NGINX Plus documents them.
func TestMatchTests(t *testing.T) {
	raw := "HTTP/1.1 302 Found\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
	var r http1.Response
	n, err := r.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	body := dechunk([]byte(raw[n:]))
	if string(body) != "hello world" {
		t.Fatalf("dechunk: %q", body)
	}
	for _, tc := range []struct {
		stmt *conf.Stmt
		pass bool
	}{
		{stmt("status", "200-399"), true},
		{stmt("status", "!", "300-399"), false},
		{stmt("status", "200", "302"), true},
		{stmt("status", "200"), false},
		{stmt("header", "Content-Type", "=", "text/html"), true},
		{stmt("header", "Content-Type", "!=", "text/html"), false},
		{stmt("header", "Content-Type", "~", "^text/"), true},
		{stmt("header", "Content-Type", "!~", "html$"), false},
		{stmt("header", "Content-Type"), true},
		{stmt("header", "!", "Content-Type"), false},
		{stmt("header", "X-None", "!=", "x"), false}, // the field must be there
		{stmt("body", "~", "lo wo"), true},
		{stmt("body", "!~", "lo wo"), false},
	} {
		mt := &Match{}
		var err error
		switch tc.stmt.Name {
		case "status":
			err = mt.addStatus(tc.stmt)
		case "header":
			err = mt.addHeader(tc.stmt)
		case "body":
			err = mt.addBody(tc.stmt)
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.stmt, err)
		}
		if ok, _ := mt.test(&r, body); ok != tc.pass {
			t.Errorf("%s %v: %v, want %v", tc.stmt.Name, tc.stmt.Args, ok, tc.pass)
		}
	}
}
