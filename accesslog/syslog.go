package accesslog

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// syslogPeer is a syslog:server=... destination (nginx's ngx_syslog_peer_t).
type syslogPeer struct {
	network    string // "udp" or "unixgram"
	addr       string
	facility   int
	severity   int
	tag        string
	nohostname bool

	conn net.Conn // the writer's, dialled on first use
}

var syslogFacilities = []string{"kern", "user", "mail", "daemon", "auth", "intern", "lpr", "news", "uucp",
	"clock", "authpriv", "ftp", "ntp", "audit", "alert", "cron", "local0", "local1", "local2", "local3",
	"local4", "local5", "local6", "local7"}

var syslogSeverities = []string{"emerg", "alert", "crit", "error", "warn", "notice", "info", "debug"}

// defaultSyslogTag is the tag without tag=: nginx writes "nginx", numaproxy its
// own name.
const defaultSyslogTag = "numaproxy"

// parseSyslog reads the parameters after "syslog:" as nginx's ngx_syslog_parse_args.
func parseSyslog(params string) (*syslogPeer, error) {
	p := &syslogPeer{facility: 23, severity: 6, tag: defaultSyslogTag}
	for _, kv := range strings.Split(params, ",") {
		switch {
		case strings.HasPrefix(kv, "server="):
			v := kv[len("server="):]
			if rest, ok := strings.CutPrefix(v, "unix:"); ok {
				if rest == "" {
					return nil, fmt.Errorf("no path in %q of syslog server", v)
				}
				p.network, p.addr = "unixgram", rest
				continue
			}
			addr, err := syslogAddr(v)
			if err != nil {
				return nil, err
			}
			p.network, p.addr = "udp", addr
		case strings.HasPrefix(kv, "facility="):
			i := indexOf(syslogFacilities, kv[len("facility="):])
			if i < 0 {
				return nil, fmt.Errorf("unknown syslog facility %q", kv[len("facility="):])
			}
			p.facility = i
		case strings.HasPrefix(kv, "severity="):
			i := indexOf(syslogSeverities, kv[len("severity="):])
			if i < 0 {
				return nil, fmt.Errorf("unknown syslog severity %q", kv[len("severity="):])
			}
			p.severity = i
		case strings.HasPrefix(kv, "tag="):
			tag := kv[len("tag="):]
			if len(tag) > 32 {
				return nil, fmt.Errorf("syslog tag length exceeds 32")
			}
			for _, c := range []byte(tag) {
				if !isVarChar(c) {
					return nil, fmt.Errorf("syslog \"tag\" only allows alphanumeric characters and underscore")
				}
			}
			p.tag = tag
		case kv == "nohostname":
			p.nohostname = true
		default:
			return nil, fmt.Errorf("unknown syslog parameter %q", kv)
		}
	}
	if p.network == "" {
		return nil, fmt.Errorf("no syslog server specified")
	}
	return p, nil
}

// syslogAddr is host[:port] with nginx's default port 514; a name is resolved once,
// at configuration time, as nginx does.
func syslogAddr(v string) (string, error) {
	host, port := v, "514"
	if h, p, err := net.SplitHostPort(v); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		host = v[1 : len(v)-1]
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("invalid port in syslog server %q", v)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return "", fmt.Errorf("host not found in syslog server %q", v)
		}
		host = ips[0].String()
	}
	return net.JoinHostPort(host, port), nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// syslogHostname is nginx's ngx_cycle->hostname: gethostname, lower-cased.
var syslogHostname = func() string {
	h, _ := os.Hostname()
	return strings.ToLower(h)
}()

var months = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// appendHeader is nginx's ngx_syslog_add_header: "<PRI>Mmm dd hh:mm:ss host tag: "
// (RFC 3164), the day padded with a space, local time.
func (p *syslogPeer) appendHeader(dst []byte, now time.Time) []byte {
	dst = append(dst, '<')
	dst = strconv.AppendInt(dst, int64(p.facility*8+p.severity), 10)
	dst = append(dst, '>')
	_, month, day := now.Date()
	hh, mm, ss := now.Clock()
	dst = append(dst, months[month-1]...)
	dst = append(dst, ' ')
	if day < 10 {
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(day), 10)
	dst = append(dst, ' ', byte('0'+hh/10), byte('0'+hh%10), ':', byte('0'+mm/10), byte('0'+mm%10), ':', byte('0'+ss/10), byte('0'+ss%10), ' ')
	if !p.nohostname {
		dst = append(dst, syslogHostname...)
		dst = append(dst, ' ')
	}
	dst = append(dst, p.tag...)
	return append(dst, ':', ' ')
}

// send sends one message, dialling first if needed; a failed send closes the
// socket so that the next message dials again.
func (p *syslogPeer) send(msg []byte) error {
	if p.conn == nil {
		c, err := net.Dial(p.network, p.addr)
		if err != nil {
			return fmt.Errorf("connect() to syslog server %s failed: %w", p.addr, err)
		}
		p.conn = c
	}
	if _, err := p.conn.Write(msg); err != nil {
		p.conn.Close()
		p.conn = nil
		return fmt.Errorf("send() to syslog server %s failed: %w", p.addr, err)
	}
	return nil
}

func (p *syslogPeer) key() string {
	return fmt.Sprintf("syslog:%s:%s:%d:%d:%s:%v", p.network, p.addr, p.facility, p.severity, p.tag, p.nohostname)
}
