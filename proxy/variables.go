package proxy

import (
	"fmt"
	"strings"
)

// VarID names a variable. Every variable a request can have is listed here and
// evaluated in one place (request.appendVar in vars_eval.go), lazily: a template
// evaluates only the variables it names, so unused ones cost nothing.
type VarID uint8

const (
	varNone VarID = iota
	VarHost
	VarHTTP // $http_NAME: a request header
	VarCookie
	VarArg // $arg_NAME: a query argument
	VarRemoteAddr
	VarRemotePort
	VarServerAddr
	VarServerPort
	VarServerName
	VarServerProtocol
	VarScheme
	VarRequest
	VarRequestMethod
	VarRequestURI
	VarURI
	VarArgs
	VarIsArgs
	VarContentLength
	VarContentType
	VarProxyHost
	VarProxyAddXForwardedFor
	VarUpstreamAddr
	VarUpstreamStatus
	VarUpstreamResponseTime
	VarStatus
	VarBodyBytesSent
	VarRequestTime
	VarTimeLocal
	VarTimeISO8601
	VarMsec
	VarConnection
	VarConnectionRequests
	VarHostname
	VarNumaNode
	VarWorkerCPU
	VarIncomingCPU
	VarHTTPS
)

// variableNames maps names to variables; prefixed ones ($http_, $arg_, $cookie_) are
// in variablePrefixes.
var variableNames = map[string]VarID{
	"host": VarHost, "remote_addr": VarRemoteAddr, "remote_port": VarRemotePort,
	"server_addr": VarServerAddr, "server_port": VarServerPort, "server_name": VarServerName,
	"server_protocol": VarServerProtocol, "scheme": VarScheme, "request": VarRequest,
	"request_method": VarRequestMethod, "request_uri": VarRequestURI, "uri": VarURI,
	"document_uri": VarURI, "args": VarArgs, "query_string": VarArgs, "is_args": VarIsArgs,
	"content_length": VarContentLength, "content_type": VarContentType, "proxy_host": VarProxyHost,
	"proxy_add_x_forwarded_for": VarProxyAddXForwardedFor, "upstream_addr": VarUpstreamAddr,
	"upstream_status": VarUpstreamStatus, "upstream_response_time": VarUpstreamResponseTime,
	"status": VarStatus, "body_bytes_sent": VarBodyBytesSent, "request_time": VarRequestTime,
	"time_local": VarTimeLocal, "time_iso8601": VarTimeISO8601, "msec": VarMsec,
	"connection": VarConnection, "connection_requests": VarConnectionRequests, "hostname": VarHostname,
	"numa_node": VarNumaNode, "worker_cpu": VarWorkerCPU, "incoming_cpu": VarIncomingCPU,
	"https": VarHTTPS,
}

var variablePrefixes = []struct {
	prefix string
	id     VarID
}{{"http_", VarHTTP}, {"arg_", VarArg}, {"cookie_", VarCookie}}

// part is a piece of a template: literal text, or a variable with its parameter
// (the NAME of $http_NAME).
type part struct {
	lit   string
	id    VarID
	param string
}

// Template is a string with $variables, compiled once at configuration load.
type Template struct {
	raw   string
	parts []part
}

// Vars supplies variable values to a template; a request implements it.
type Vars interface {
	AppendVar(dst []byte, id VarID, param string) []byte
}

// CompileTemplate parses "$name" and "${name}" references; "$" followed by anything
// else is literal, as in nginx. An unknown variable is an error.
func CompileTemplate(s string) (*Template, error) {
	t := &Template{raw: s}
	lit := strings.Builder{}
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			lit.WriteByte(s[i])
			continue
		}
		var name string
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("the closing bracket in %q variable is missing", s[i+2:])
			}
			name = s[i+2 : i+2+end]
			i += 2 + end
		} else {
			j := i + 1
			for j < len(s) && isVarChar(s[j]) {
				j++
			}
			if j == i+1 {
				lit.WriteByte('$')
				continue
			}
			name = s[i+1 : j]
			i = j - 1
		}
		p, err := lookupVariable(name)
		if err != nil {
			return nil, err
		}
		flush()
		t.parts = append(t.parts, p)
	}
	flush()
	return t, nil
}

func lookupVariable(name string) (part, error) {
	if name == "" {
		return part{}, fmt.Errorf("invalid variable name")
	}
	if name[0] >= '0' && name[0] <= '9' {
		return part{}, fmt.Errorf("regex captures ($%s) are not supported", name)
	}
	if id, ok := variableNames[strings.ToLower(name)]; ok {
		return part{id: id}, nil
	}
	lower := strings.ToLower(name)
	for _, p := range variablePrefixes {
		if strings.HasPrefix(lower, p.prefix) && len(lower) > len(p.prefix) {
			param := lower[len(p.prefix):]
			if p.id == VarHTTP {
				// $http_user_agent names User-Agent: underscores stand for dashes.
				param = strings.ReplaceAll(param, "_", "-")
			}
			if p.id == VarArg || p.id == VarCookie {
				param = name[len(p.prefix):] // arguments and cookies keep their case
			}
			return part{id: p.id, param: param}, nil
		}
	}
	return part{}, fmt.Errorf("unknown %q variable", name)
}

func isVarChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

func mustTemplate(s string) *Template {
	t, err := CompileTemplate(s)
	if err != nil {
		panic(err)
	}
	return t
}

// Static reports a template without variables.
func (t *Template) Static() bool {
	for _, p := range t.parts {
		if p.id != varNone {
			return false
		}
	}
	return true
}

// Uses reports whether the template names variable id.
func (t *Template) Uses(id VarID) bool {
	for _, p := range t.parts {
		if p.id == id {
			return true
		}
	}
	return false
}

// String returns the template as written.
func (t *Template) String() string { return t.raw }

// Append evaluates the template into dst.
func (t *Template) Append(dst []byte, v Vars) []byte {
	for i := range t.parts {
		p := &t.parts[i]
		if p.id == varNone {
			dst = append(dst, p.lit...)
		} else {
			dst = v.AppendVar(dst, p.id, p.param)
		}
	}
	return dst
}
