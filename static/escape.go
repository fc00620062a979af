package static

// nginx's escaping tables (ngx_escape_uri), one bit per byte value: 1 means escape.
var (
	// escapeURI: a URI path (NGX_ESCAPE_URI): " ", "#", "%", "?", controls, and
	// "\"", "<", ">", "\\", "^", "`", "{", "|", "}", DEL and bytes >= 0x80.
	escapeURI = escapeTable([8]uint32{0xffffffff, 0xd000002d, 0x50000000, 0xb8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff})
	// escapeComponent: everything but ALPHA, DIGIT, "-", ".", "_", "~"
	// (NGX_ESCAPE_URI_COMPONENT), for autoindex links.
	escapeComponent = escapeTable([8]uint32{0xffffffff, 0xfc009fff, 0x78000001, 0xb8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff})
)

func escapeTable(bits [8]uint32) (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = bits[c>>5]&(1<<(c&31)) != 0
	}
	return t
}

const upperHex = "0123456789ABCDEF"

// appendEscaped appends s with the bytes table marks written as %XX.
func appendEscaped(dst, s []byte, table *[256]bool) []byte {
	for _, c := range s {
		if table[c] {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// appendHTML appends s with nginx's HTML escaping (ngx_escape_html): < > & ".
func appendHTML(dst, s []byte) []byte {
	for _, c := range s {
		switch c {
		case '<':
			dst = append(dst, "&lt;"...)
		case '>':
			dst = append(dst, "&gt;"...)
		case '&':
			dst = append(dst, "&amp;"...)
		case '"':
			dst = append(dst, "&quot;"...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendJSON appends s with nginx's JSON string escaping (ngx_escape_json).
func appendJSON(dst, s []byte) []byte {
	for _, c := range s {
		if c > 0x1f {
			if c == '\\' || c == '"' {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '\\')
		switch c {
		case '\n':
			dst = append(dst, 'n')
		case '\r':
			dst = append(dst, 'r')
		case '\t':
			dst = append(dst, 't')
		case '\b':
			dst = append(dst, 'b')
		case '\f':
			dst = append(dst, 'f')
		default:
			dst = append(dst, 'u', '0', '0', '0'+c>>4, upperHex[c&15])
		}
	}
	return dst
}
