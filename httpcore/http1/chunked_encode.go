package http1

const hexDigits = "0123456789abcdef"

// AppendChunkHeader appends the chunk-size line for a chunk of size bytes
// ("1a2b\r\n"), for callers that write the data itself separately (writev),
// followed by AppendChunkEnd. size must be positive: a zero size is the
// last-chunk.
func AppendChunkHeader(dst []byte, size int) []byte {
	var digits [16]byte
	i := len(digits)
	for u := uint64(size); ; u >>= 4 {
		i--
		digits[i] = hexDigits[u&0xf]
		if u < 16 {
			break
		}
	}
	dst = append(dst, digits[i:]...)
	return append(dst, '\r', '\n')
}

// AppendChunkEnd appends the CRLF that closes a chunk's data.
func AppendChunkEnd(dst []byte) []byte { return append(dst, '\r', '\n') }

// AppendChunk appends data as one chunk (RFC 9112 §7.1). Empty data appends
// nothing, since an empty chunk would end the body.
func AppendChunk(dst, data []byte) []byte {
	if len(data) == 0 {
		return dst
	}
	dst = AppendChunkHeader(dst, len(data))
	dst = append(dst, data...)
	return AppendChunkEnd(dst)
}

// AppendLastChunk appends the last-chunk, the trailer section and the final
// CRLF. trailers is nil or complete field lines, each ending in CRLF.
func AppendLastChunk(dst, trailers []byte) []byte {
	dst = append(dst, '0', '\r', '\n')
	dst = append(dst, trailers...)
	return append(dst, '\r', '\n')
}
