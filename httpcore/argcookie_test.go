package httpcore

import (
	"testing"

	"github.com/numaproxy/numaproxy/httpcore/http1"
)

// TestArgValue: nginx's ngx_http_arg. An argument is found only with its "=";
// the name compares in any case and only at the start of an argument.
func TestArgValue(t *testing.T) {
	for _, c := range []struct {
		args, name, want string
		found            bool
	}{
		{"a=1&b=2", "b", "2", true},
		{"ab=1&b=2", "b", "2", true},
		{"q&q=second", "q", "second", true},
		{"q=", "q", "", true},
		{"x=1&q=", "q", "", true},
		{"q", "q", "", false},
		{"Q=x", "q", "x", true},
		{"xq=1", "q", "", false},
		{"", "q", "", false},
	} {
		v, found := ArgValue([]byte(c.args), c.name)
		if string(v) != c.want || found != c.found {
			t.Errorf("ArgValue(%q, %q) = %q, %v; want %q, %v", c.args, c.name, v, found, c.want, c.found)
		}
	}
}

// TestCookieValue: nginx 1.22's ngx_http_parse_multi_header_lines over every
// Cookie field: ";" or "," between cookies, spaces around "=", the value to the
// next ";" (spaces and commas kept), the name in any case.
func TestCookieValue(t *testing.T) {
	for _, c := range []struct {
		fields     []string
		name, want string
		found      bool
	}{
		{[]string{"a=1; b=2"}, "b", "2", true},
		{[]string{"a=1", "d=2;  c = v2 ;x"}, "c", "v2 ", true},
		{[]string{"d=1, C ="}, "c", "", true},
		{[]string{"ab=1"}, "a", "", false},
		{[]string{"a=1,b=2"}, "b", "2", true},
		{[]string{"a=x,y; b=3"}, "a", "x,y", true},
		{[]string{"a"}, "a", "", false},
		{[]string{"b=1"}, "a", "", false},
	} {
		head := "GET / HTTP/1.1\r\nHost: t\r\n"
		for _, f := range c.fields {
			head += "Cookie: " + f + "\r\n"
		}
		var r http1.Request
		if _, err := r.Parse([]byte(head + "\r\n")); err != nil {
			t.Fatal(err)
		}
		v, found := CookieValue(&r.Headers, c.name)
		if string(v) != c.want || found != c.found {
			t.Errorf("CookieValue(%q, %q) = %q, %v; want %q, %v", c.fields, c.name, v, found, c.want, c.found)
		}
	}
}
