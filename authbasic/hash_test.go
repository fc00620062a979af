package authbasic

import (
	"bufio"
	"bytes"
	"crypto/des"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

// With no salt and one round, crypt's DES is FIPS 46 DES: crypto/des checks every table.
func TestDESMatchesCryptoDES(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var key [8]byte
		binary.BigEndian.PutUint64(key[:], r.Uint64())
		block := r.Uint64()
		var c desCipher
		c.setKey(key)
		got := c.encrypt(block, 1)
		std, _ := des.NewCipher(key[:])
		var in, out [8]byte
		binary.BigEndian.PutUint64(in[:], block)
		std.Encrypt(out[:], in[:])
		if want := binary.BigEndian.Uint64(out[:]); got != want {
			t.Fatalf("key %x block %x: got %x, want %x", key, block, got, want)
		}
	}
}

// libcrypt computes crypt(3) through perl (perl-base is essential on Debian), the
// function nginx's fallback calls.
func libcrypt(t testing.TB, pairs [][2]string) []string {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("no perl")
	}
	var in bytes.Buffer
	for _, p := range pairs {
		fmt.Fprintf(&in, "%s %s\n", hex.EncodeToString([]byte(p[0])), hex.EncodeToString([]byte(p[1])))
	}
	cmd := exec.Command("perl", "-ne", `chomp; my ($k, $s) = map { pack("H*", $_) } split / /; my $r = crypt($k, $s); print defined $r ? unpack("H*", $r) : "", "\n";`)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var res []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		b, _ := hex.DecodeString(sc.Text())
		res = append(res, string(b))
	}
	if len(res) != len(pairs) {
		t.Fatalf("perl answered %d of %d", len(res), len(pairs))
	}
	return res
}

func randomString(r *rand.Rand, alphabet string, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// Random passwords (any byte but NUL, any length up to 140) and settings of each
// libcrypt scheme we implement: crypt's answer is the hash that must verify, and
// a changed password must not.
func TestCryptSchemesMatchLibcrypt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var pairs [][2]string
	settings := func() string {
		salt := randomString(r, cryptAlphabet, 1+r.IntN(20))
		switch r.IntN(8) {
		case 0:
			return salt[:min(2, len(salt))] + "x" // DES, maybe too short
		case 1:
			return "$1$" + salt + "$"
		case 2:
			return "$5$" + salt
		case 3:
			return fmt.Sprintf("$5$rounds=%d$%s$", 1000+r.IntN(2000), salt)
		case 4:
			return "$6$" + salt + "$"
		case 5:
			return fmt.Sprintf("$6$rounds=%d$%s", 1000+r.IntN(2000), salt)
		case 6:
			return "_" + randomString(r, cryptAlphabet, 8) // BSDi, counts up to 2^24: keep them small below
		default:
			// bigcrypt: a DES setting longer than 13 characters
			return randomString(r, cryptAlphabet, 2) + strings.Repeat("x", 11*(1+r.IntN(3)))
		}
	}
	for range 400 {
		n := r.IntN(30)
		if r.IntN(10) == 0 {
			n = r.IntN(140)
		}
		pw := make([]byte, n)
		for i := range pw {
			pw[i] = byte(1 + r.IntN(255))
		}
		s := settings()
		if s[0] == '_' {
			s = "_" + randomString(r, "./01", 1) + "..." + s[5:] // count < 4
		}
		pairs = append(pairs, [2]string{string(pw), s})
	}
	want := libcrypt(t, pairs)
	for i, p := range pairs {
		h := ParseHash([]byte(want[i]))
		if want[i] == "" || want[i][0] == '*' {
			t.Fatalf("crypt(%q, %q) failed: %q", p[0], p[1], want[i])
		}
		if h.Problem() != "" {
			t.Fatalf("%q: %s", want[i], h.Problem())
		}
		if !h.Verify([]byte(p[0])) {
			t.Fatalf("%v %q does not verify password %q (setting %q)", h.Scheme(), want[i], p[0], p[1])
		}
		if h.Verify([]byte(p[0]+"x")) && len(p[0]) < 8 {
			t.Fatalf("%q verifies a wrong password", want[i])
		}
	}
}

// bcrypt through x/crypto, behind ParseHash's checks, answers as crypt_blowfish:
// random passwords (8-bit bytes, past 72 bytes) and salts at cost 4, each version.
func TestBcryptMatchesLibcrypt(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const bf64 = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var pairs [][2]string
	for i := range 60 {
		pw := make([]byte, r.IntN(90))
		for j := range pw {
			pw[j] = byte(1 + r.IntN(255))
		}
		salt := randomString(r, bf64, 21) + randomString(r, ".Oeu", 1)
		pairs = append(pairs, [2]string{string(pw), "$2" + string("aby"[i%3]) + "$04$" + salt})
	}
	// crypt_blowfish's own vectors for the $2a$ countermeasure.
	pairs = append(pairs, [2]string{"\xff\xff\xa3", "$2a$05$/OK.fbVrR/bpIqNJ5ianF."}, [2]string{"\xa3", "$2a$05$/OK.fbVrR/bpIqNJ5ianF."},
		[2]string{"\xff\xff\xa3", "$2b$05$/OK.fbVrR/bpIqNJ5ianF."})
	want := libcrypt(t, pairs)
	flipped := 0
	for i, p := range pairs {
		h := ParseHash([]byte(want[i]))
		if h.Scheme() != SchemeBcrypt || h.Problem() != "" {
			t.Fatalf("%q: %v %s", want[i], h.Scheme(), h.Problem())
		}
		if p[1][2] == 'a' && bcryptSafetyFlip([]byte(p[0])) {
			flipped++
			if h.Verify([]byte(p[0])) {
				t.Errorf("%q: a countermeasure password verifies", want[i])
			}
			continue
		}
		if !h.Verify([]byte(p[0])) {
			t.Errorf("%q does not verify %q", want[i], p[0])
		}
	}
	// The countermeasure changed libcrypt's $2a$ hash of "\xff\xff\xa3": its $2b$ is another.
	if n := len(want); flipped != 1 || want[n-3][7:] == want[n-1][7:] {
		t.Errorf("countermeasure: %d flipped, hashes %q %q", flipped, want[n-3], want[n-1])
	}
}
