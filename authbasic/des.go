package authbasic

// The DES of crypt(3): standard DES (FIPS 46) whose expansion is perturbed by a salt
// (salt bit i swaps bits i and i+24 of the 48-bit E output) and which encrypts a
// block of zeroes 25 times (traditional and bigcrypt) or a chosen number of times
// (BSDi). Tables are FIPS 46's, numbered from 1 at the most significant bit.

var (
	desIP = [64]byte{
		58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4,
		62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
		57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
		61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
	}
	desFP = [64]byte{
		40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31,
		38, 6, 46, 14, 54, 22, 62, 30, 37, 5, 45, 13, 53, 21, 61, 29,
		36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27,
		34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25,
	}
	desP = [32]byte{
		16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
		2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
	}
	desPC1 = [56]byte{
		57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18,
		10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
		63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22,
		14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
	}
	desPC2 = [48]byte{
		14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10,
		23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
		41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48,
		44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
	}
	desShifts = [16]byte{1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1}
	desS      = [8][64]byte{
		{14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7,
			0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
			4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0,
			15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13},
		{15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10,
			3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
			0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15,
			13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9},
		{10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8,
			13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
			13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7,
			1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12},
		{7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15,
			13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
			10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4,
			3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14},
		{2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9,
			14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
			4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14,
			11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3},
		{12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11,
			10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
			9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6,
			4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13},
		{4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1,
			13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
			1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2,
			6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12},
		{13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7,
			1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
			7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8,
			2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11},
	}
)

// desSP is S-box j followed by P, indexed by the 6 input bits of box j.
var desSP = func() (sp [8][64]uint32) {
	for j := range 8 {
		for six := range 64 {
			row := (six>>4)&2 | six&1
			col := (six >> 1) & 15
			v := uint64(desS[j][row*16+col]) << (28 - 4*j)
			sp[j][six] = uint32(permute(v, 32, desP[:]))
		}
	}
	return
}()

// permute returns the bits of in (inBits wide) in the order table names them.
func permute(in uint64, inBits int, table []byte) uint64 {
	var out uint64
	for _, p := range table {
		out = out<<1 | (in>>(inBits-int(p)))&1
	}
	return out
}

// desCipher is one key schedule and salt.
type desCipher struct {
	kl, kr   [16]uint32 // the 48-bit round keys, in 24-bit halves
	saltbits uint32     // which bits of the two 24-bit halves of E's output swap
}

// setKey takes 8 key bytes, most significant first; PC1 ignores each byte's low bit.
func (c *desCipher) setKey(key [8]byte) {
	k := uint64(0)
	for _, b := range key {
		k = k<<8 | uint64(b)
	}
	cd := permute(k, 64, desPC1[:])
	l, r := uint32(cd>>28), uint32(cd&0xfffffff)
	for i, s := range desShifts {
		l = (l<<s | l>>(28-s)) & 0xfffffff
		r = (r<<s | r>>(28-s)) & 0xfffffff
		k := permute(uint64(l)<<28|uint64(r), 56, desPC2[:])
		c.kl[i], c.kr[i] = uint32(k>>24), uint32(k)&0xffffff
	}
}

// setSalt takes the salt's bits, least significant first (12 for traditional DES,
// 24 for BSDi): bit i swaps E's output bits i and i+24 (counted from the top).
func (c *desCipher) setSalt(salt uint32) {
	c.saltbits = 0
	for i := range 24 {
		if salt&(1<<i) != 0 {
			c.saltbits |= 1 << (23 - i)
		}
	}
}

// encrypt runs count encryptions of block (zero counts as one, as libcrypt does).
func (c *desCipher) encrypt(block uint64, count uint32) uint64 {
	x := permute(block, 64, desIP[:])
	l, r := uint32(x>>32), uint32(x)
	count = max(count, 1)
	for ; count > 0; count-- {
		for i := range c.kl {
			// E in two 24-bit halves: box j reads the six bits of r that start one
			// before bit 4j (counted from 1 at the top), wrapping around.
			el := r<<23&0x800000 | r>>9&0x7c0000 | r>>11&0x3f000 | r>>13&0xfc0 | r>>15&0x3f
			er := r<<7&0xfc0000 | r<<5&0x3f000 | r<<3&0xfc0 | r<<1&0x3e | r>>31
			f := (el ^ er) & c.saltbits
			el ^= f ^ c.kl[i]
			er ^= f ^ c.kr[i]
			out := desSP[0][el>>18&63] | desSP[1][el>>12&63] | desSP[2][el>>6&63] | desSP[3][el&63] |
				desSP[4][er>>18&63] | desSP[5][er>>12&63] | desSP[6][er>>6&63] | desSP[7][er&63]
			l, r = r, l^out
		}
		l, r = r, l
	}
	return permute(uint64(l)<<32|uint64(r), 64, desFP[:])
}

// desChar maps a character of crypt's alphabet to its value, -1 outside it.
func desChar(ch byte) int {
	switch {
	case ch >= '.' && ch <= '9':
		return int(ch - '.')
	case ch >= 'A' && ch <= 'Z':
		return int(ch-'A') + 12
	case ch >= 'a' && ch <= 'z':
		return int(ch-'a') + 38
	}
	return -1
}

// desKey builds the key of up to 8 password characters, each shifted up one bit;
// it returns the rest of the password. xor is BSDi's chaining (zero otherwise).
func desKey(pw []byte, xor uint64) ([8]byte, []byte) {
	var k [8]byte
	for i := range k {
		var ch byte
		if len(pw) > 0 {
			ch, pw = pw[0], pw[1:]
		}
		k[i] = ch<<1 ^ byte(xor>>(56-8*i))
	}
	return k, pw
}

// appendDESBlock encodes a 64-bit result as crypt's 11 characters.
func appendDESBlock(dst []byte, v uint64) []byte {
	for i := range 10 {
		dst = append(dst, cryptAlphabet[(v>>(58-6*i))&63])
	}
	return append(dst, cryptAlphabet[(v<<2)&63])
}

// appendDESCrypt appends crypt(3) of pw with the 2-character salt setting: the
// traditional hash of the first 8 characters, or bigcrypt (a block of 11 characters
// for each 8 of the password, each block salted by the start of the one before)
// when long is set.
func appendDESCrypt(dst, pw []byte, s0, s1 byte, long bool) []byte {
	var c desCipher
	salt := uint32(desChar(s0)) | uint32(desChar(s1))<<6
	dst = append(dst, s0, s1)
	for seg := 0; seg < 16; seg++ {
		var key [8]byte
		key, pw = desKey(pw, 0)
		c.setKey(key)
		c.setSalt(salt)
		start := len(dst)
		dst = appendDESBlock(dst, c.encrypt(0, 25))
		if len(pw) == 0 || !long {
			break
		}
		salt = uint32(desChar(dst[start])) | uint32(desChar(dst[start+1]))<<6
	}
	return dst
}

// appendBSDICrypt appends BSDi's extended DES hash: setting is "_", 4 characters of
// iteration count and 4 of salt; passwords longer than 8 characters are folded into
// one key by encrypting each key with itself, chained.
func appendBSDICrypt(dst, pw []byte, setting string) []byte {
	var count, salt uint32
	for i := range 4 {
		count |= uint32(desChar(setting[1+i])) << (6 * i)
		salt |= uint32(desChar(setting[5+i])) << (6 * i)
	}
	var c desCipher
	var chain uint64
	for {
		var key [8]byte
		key, pw = desKey(pw, chain)
		c.setKey(key)
		if len(pw) == 0 {
			break
		}
		k := uint64(0)
		for _, b := range key {
			k = k<<8 | uint64(b)
		}
		chain = c.encrypt(k, 1)
	}
	c.setSalt(salt)
	dst = append(dst, setting[:9]...)
	return appendDESBlock(dst, c.encrypt(0, count))
}
