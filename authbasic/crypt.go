package authbasic

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"io"
)

// cryptAlphabet is crypt(3)'s base-64 alphabet.
const cryptAlphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// append24 encodes three bytes as n characters, least significant first.
func append24(dst []byte, b2, b1, b0 byte, n int) []byte {
	w := uint32(b2)<<16 | uint32(b1)<<8 | uint32(b0)
	for ; n > 0; n-- {
		dst = append(dst, cryptAlphabet[w&63])
		w >>= 6
	}
	return dst
}

// appendMD5Crypt appends Poul-Henning Kamp's MD5 crypt of pw: magic is "$1$" for
// crypt(3) and "$apr1$" for Apache's variant, salt at most 8 characters.
func appendMD5Crypt(dst, pw []byte, magic, saltString string) []byte {
	var sb [8]byte
	salt := append(sb[:0], saltString...)
	h := md5.New()
	h.Write(pw)
	h.Write(salt)
	h.Write(pw)
	var fin [md5.Size]byte
	h.Sum(fin[:0])

	h.Reset()
	h.Write(pw)
	io.WriteString(h, magic)
	h.Write(salt)
	for n := len(pw); n > 0; n -= md5.Size {
		h.Write(fin[:min(n, md5.Size)])
	}
	// For each bit of the length, a zero byte or the password's first byte:
	// the original's quirk, kept by every implementation.
	zero := [1]byte{}
	for n := len(pw); n > 0; n >>= 1 {
		if n&1 != 0 {
			h.Write(zero[:])
		} else {
			h.Write(pw[:1])
		}
	}
	h.Sum(fin[:0])

	for i := range 1000 {
		h.Reset()
		if i&1 != 0 {
			h.Write(pw)
		} else {
			h.Write(fin[:])
		}
		if i%3 != 0 {
			h.Write(salt)
		}
		if i%7 != 0 {
			h.Write(pw)
		}
		if i&1 != 0 {
			h.Write(fin[:])
		} else {
			h.Write(pw)
		}
		h.Sum(fin[:0])
	}

	dst = append(dst, magic...)
	dst = append(dst, salt...)
	dst = append(dst, '$')
	f := &fin
	dst = append24(dst, f[0], f[6], f[12], 4)
	dst = append24(dst, f[1], f[7], f[13], 4)
	dst = append24(dst, f[2], f[8], f[14], 4)
	dst = append24(dst, f[3], f[9], f[15], 4)
	dst = append24(dst, f[4], f[10], f[5], 4)
	return append24(dst, 0, 0, f[11], 2)
}

// sha256Order and sha512Order are the byte triples of Drepper's SHA-crypt encodings.
var (
	sha256Order = [][3]int{
		{0, 10, 20}, {21, 1, 11}, {12, 22, 2}, {3, 13, 23}, {24, 4, 14},
		{15, 25, 5}, {6, 16, 26}, {27, 7, 17}, {18, 28, 8}, {9, 19, 29},
	}
	sha512Order = [][3]int{
		{0, 21, 42}, {22, 43, 1}, {44, 2, 23}, {3, 24, 45}, {25, 46, 4},
		{47, 5, 26}, {6, 27, 48}, {28, 49, 7}, {50, 8, 29}, {9, 30, 51},
		{31, 52, 10}, {53, 11, 32}, {12, 33, 54}, {34, 55, 13}, {56, 14, 35},
		{15, 36, 57}, {37, 58, 16}, {59, 17, 38}, {18, 39, 60}, {40, 61, 19},
		{62, 20, 41},
	}
)

// appendSHACrypt appends Ulrich Drepper's SHA-crypt of pw ("$5$" SHA-256 or "$6$"
// SHA-512): salt at most 16 characters; "rounds=N$" is written when custom.
func appendSHACrypt(dst, pw []byte, sha512Crypt bool, saltString string, rounds int, custom bool) []byte {
	var sb [16]byte
	salt := append(sb[:0], saltString...)
	var h hash.Hash
	magic := "$5$"
	if sha512Crypt {
		h, magic = sha512.New(), "$6$"
	} else {
		h = sha256.New()
	}
	size := h.Size()
	var bufA, bufB, bufP, bufS [sha512.Size]byte

	h.Write(pw)
	h.Write(salt)
	h.Write(pw)
	b := h.Sum(bufB[:0])

	h.Reset()
	h.Write(pw)
	h.Write(salt)
	n := len(pw)
	for ; n > size; n -= size {
		h.Write(b)
	}
	h.Write(b[:n])
	for n := len(pw); n > 0; n >>= 1 {
		if n&1 != 0 {
			h.Write(b)
		} else {
			h.Write(pw)
		}
	}
	a := h.Sum(bufA[:0])

	h.Reset()
	for range len(pw) {
		h.Write(pw)
	}
	dp := h.Sum(bufP[:0])
	h.Reset()
	for range 16 + int(a[0]) {
		h.Write(salt)
	}
	ds := h.Sum(bufS[:0])

	// P and S: the digests repeated to the length of the password and of the salt.
	var pbuf [512]byte
	p := pbuf[:0]
	if len(pw) > len(pbuf) {
		p = make([]byte, 0, len(pw))
	}
	for len(p) < len(pw) {
		p = append(p, dp[:min(size, len(pw)-len(p))]...)
	}
	var sbuf [16]byte
	s := sbuf[:0]
	for len(s) < len(salt) {
		s = append(s, ds[:min(size, len(salt)-len(s))]...)
	}

	c := a
	for i := range rounds {
		h.Reset()
		if i&1 != 0 {
			h.Write(p)
		} else {
			h.Write(c)
		}
		if i%3 != 0 {
			h.Write(s)
		}
		if i%7 != 0 {
			h.Write(p)
		}
		if i&1 != 0 {
			h.Write(c)
		} else {
			h.Write(p)
		}
		c = h.Sum(c[:0])
	}

	dst = append(dst, magic...)
	if custom {
		dst = append(dst, "rounds="...)
		dst = appendUint(dst, rounds)
		dst = append(dst, '$')
	}
	dst = append(dst, salt...)
	dst = append(dst, '$')
	if sha512Crypt {
		for _, o := range sha512Order {
			dst = append24(dst, c[o[0]], c[o[1]], c[o[2]], 4)
		}
		return append24(dst, 0, 0, c[63], 2)
	}
	for _, o := range sha256Order {
		dst = append24(dst, c[o[0]], c[o[1]], c[o[2]], 4)
	}
	return append24(dst, 0, c[31], c[30], 3)
}

func appendUint(dst []byte, n int) []byte {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}
