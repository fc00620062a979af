package httpcore

import (
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NginxVersion is what $nginx_version answers: the nginx release whose behaviour
// numaproxy follows and is compared with (Debian's nginx 1.22.1), so that
// configurations and scripts that test it see the level of compatibility.
const NginxVersion = "1.22.1"

// miscVariables are nginx's $pid, $nginx_version and $tcpinfo_*.
var miscVariables = []Variable{
	{Name: "pid", Get: func(dst []byte, _ *Request, _ string) []byte { return strconv.AppendInt(dst, int64(pid), 10) }},
	{Name: "nginx_version", Get: func(dst []byte, _ *Request, _ string) []byte { return append(dst, NginxVersion...) }},
	{Name: "tcpinfo_rtt", Get: func(dst []byte, r *Request, _ string) []byte {
		return appendTCPInfo(dst, r, func(ti *unix.TCPInfo) uint32 { return ti.Rtt })
	}},
	{Name: "tcpinfo_rttvar", Get: func(dst []byte, r *Request, _ string) []byte {
		return appendTCPInfo(dst, r, func(ti *unix.TCPInfo) uint32 { return ti.Rttvar })
	}},
	{Name: "tcpinfo_snd_cwnd", Get: func(dst []byte, r *Request, _ string) []byte {
		return appendTCPInfo(dst, r, func(ti *unix.TCPInfo) uint32 { return ti.Snd_cwnd })
	}},
	{Name: "tcpinfo_rcv_space", Get: func(dst []byte, r *Request, _ string) []byte {
		return appendTCPInfo(dst, r, func(ti *unix.TCPInfo) uint32 { return ti.Rcv_space })
	}},
}

var pid = os.Getpid()

// appendTCPInfo appends a field of the client socket's TCP_INFO, read into the
// stack (x/sys's GetsockoptTCPInfo allocates), or nothing if the call fails.
func appendTCPInfo(dst []byte, r *Request, field func(*unix.TCPInfo) uint32) []byte {
	var ti unix.TCPInfo
	size := uint32(unsafe.Sizeof(ti))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(r.c.conn.Fd()), unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&ti)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return dst
	}
	return strconv.AppendUint(dst, uint64(field(&ti)), 10)
}
