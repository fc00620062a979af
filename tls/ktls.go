package tls

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	stdtls "crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux's kTLS interface (include/uapi/linux/tls.h); x/sys/unix has SOL_TLS and
// TCP_ULP only.
const (
	solTLS = unix.SOL_TLS
	tlsTX  = 1
	tlsRX  = 2

	tlsVersion12 = 0x0303
	tlsVersion13 = 0x0304

	cipherAESGCM128 = 51
	cipherAESGCM256 = 52
	cipherChaCha20  = 54
)

// kernelCipher is one AEAD as the kernel names and sizes it.
type kernelCipher struct {
	name    string
	id      uint16
	keyLen  int
	saltLen int // implicit nonce part (TLS 1.2 GCM's fixed IV)
	ivLen   int // the crypto_info iv field
	hash    func() hash.Hash
}

var (
	kAESGCM128 = &kernelCipher{"AES-128-GCM", cipherAESGCM128, 16, 4, 8, sha256.New}
	kAESGCM256 = &kernelCipher{"AES-256-GCM", cipherAESGCM256, 32, 4, 8, sha512.New384}
	kChaCha20  = &kernelCipher{"CHACHA20-POLY1305", cipherChaCha20, 32, 0, 12, sha256.New}
)

// kernelCipherOf maps a negotiated Go cipher suite to the kernel's AEAD; nil for
// suites the kernel does not do (CBC) or that Go does not negotiate.
func kernelCipherOf(suite uint16) *kernelCipher {
	switch suite {
	case stdtls.TLS_AES_128_GCM_SHA256,
		stdtls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, stdtls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		stdtls.TLS_RSA_WITH_AES_128_GCM_SHA256:
		return kAESGCM128
	case stdtls.TLS_AES_256_GCM_SHA384,
		stdtls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, stdtls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		stdtls.TLS_RSA_WITH_AES_256_GCM_SHA384:
		return kAESGCM256
	case stdtls.TLS_CHACHA20_POLY1305_SHA256,
		stdtls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, stdtls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256:
		return kChaCha20
	}
	return nil
}

// cryptoInfo is struct tls12_crypto_info_* laid out by hand: version and cipher
// (host order, u16 each), iv, key, salt, rec_seq. The largest is 56 bytes.
type cryptoInfo struct {
	b [56]byte
	n int
}

// trafficKeys are one direction's record protection state.
type trafficKeys struct {
	key  []byte
	iv   []byte // TLS 1.3: the 12-byte per-record nonce base; TLS 1.2 ChaCha20: the same
	salt []byte // TLS 1.2 GCM: the 4-byte implicit part
	seq  uint64 // the next record's sequence number
}

func (k *trafficKeys) wipe() {
	clear(k.key)
	clear(k.iv)
	clear(k.salt)
}

func newCryptoInfo(version uint16, kc *kernelCipher, k *trafficKeys) *cryptoInfo {
	ci := &cryptoInfo{}
	binary.NativeEndian.PutUint16(ci.b[0:], version)
	binary.NativeEndian.PutUint16(ci.b[2:], kc.id)
	off := 4
	iv := ci.b[off : off+kc.ivLen]
	off += kc.ivLen
	copy(ci.b[off:off+kc.keyLen], k.key)
	off += kc.keyLen
	salt := ci.b[off : off+kc.saltLen]
	off += kc.saltLen
	binary.BigEndian.PutUint64(ci.b[off:], k.seq)
	off += 8
	ci.n = off
	switch {
	case kc.saltLen == 0: // ChaCha20-Poly1305: the whole 12-byte nonce base
		copy(iv, k.iv)
	case version == tlsVersion13: // AES-GCM, TLS 1.3: salt = nonce base[:4], iv = [4:]
		copy(salt, k.iv[:4])
		copy(iv, k.iv[4:])
	default: // AES-GCM, TLS 1.2: the implicit salt; iv is the first explicit nonce, the sequence number as Go sends it
		copy(salt, k.salt)
		binary.BigEndian.PutUint64(iv, k.seq)
	}
	return ci
}

func (ci *cryptoInfo) wipe() { clear(ci.b[:]) }

// setsockopt without copying the key material into a string.
func setsockoptBytes(fd, level, opt int, b []byte) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// installKTLS hands the record layer of fd to the kernel: receive first, so that
// a failure leaves nothing half-installed for the common error (an unsupported
// cipher fails on either).
func installKTLS(fd int, version uint16, kc *kernelCipher, tx, rx *trafficKeys) error {
	if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_ULP, "tls"); err != nil {
		return fmt.Errorf("TCP_ULP tls: %w", err)
	}
	rxi := newCryptoInfo(version, kc, rx)
	defer rxi.wipe()
	if err := setsockoptBytes(fd, solTLS, tlsRX, rxi.b[:rxi.n]); err != nil {
		return fmt.Errorf("TLS_RX %s: %w", kc.name, err)
	}
	txi := newCryptoInfo(version, kc, tx)
	defer txi.wipe()
	if err := setsockoptBytes(fd, solTLS, tlsTX, txi.b[:txi.n]); err != nil {
		return fmt.Errorf("%w: TLS_TX %s: %w", errHalfInstalled, kc.name, err)
	}
	return nil
}

// errHalfInstalled: TLS_RX is in place but TLS_TX failed; the connection can
// go neither way and must be closed.
var errHalfInstalled = errors.New("kTLS receive installed without transmit")

// hkdfExpandLabel is TLS 1.3's HKDF-Expand-Label with an empty context.
func hkdfExpandLabel(h func() hash.Hash, secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0)
	return hkdf.Expand(h, secret, string(info), n)
}

// keys13 derives a TLS 1.3 direction's key and nonce base from its traffic secret.
func keys13(kc *kernelCipher, secret []byte) (*trafficKeys, error) {
	key, err := hkdfExpandLabel(kc.hash, secret, "key", kc.keyLen)
	if err != nil {
		return nil, err
	}
	iv, err := hkdfExpandLabel(kc.hash, secret, "iv", 12)
	if err != nil {
		return nil, err
	}
	return &trafficKeys{key: key, iv: iv}, nil
}

// prf12 is TLS 1.2's PRF (P_hash with the suite's hash).
func prf12(h func() hash.Hash, secret []byte, label string, seed []byte, n int) []byte {
	ls := append([]byte(label), seed...)
	out := make([]byte, 0, n+64)
	mac := hmac.New(h, secret)
	mac.Write(ls)
	a := mac.Sum(nil)
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(ls)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:n]
}

// keys12 derives TLS 1.2's server (write) and client (read) keys from the master
// secret: key_block = PRF(master, "key expansion", server_random + client_random),
// laid out client key, server key, client IV, server IV (AEAD suites have no MAC key).
func keys12(kc *kernelCipher, master, clientRandom, serverRandom []byte) (server, client *trafficKeys) {
	ivLen := 4 // GCM's fixed IV
	if kc.saltLen == 0 {
		ivLen = 12 // ChaCha20-Poly1305 (RFC 7905)
	}
	seed := append(append([]byte{}, serverRandom...), clientRandom...)
	kb := prf12(kc.hash, master, "key expansion", seed, 2*kc.keyLen+2*ivLen)
	ck, sk := kb[:kc.keyLen], kb[kc.keyLen:2*kc.keyLen]
	civ, siv := kb[2*kc.keyLen:2*kc.keyLen+ivLen], kb[2*kc.keyLen+ivLen:]
	server, client = &trafficKeys{key: sk}, &trafficKeys{key: ck}
	if kc.saltLen == 0 {
		server.iv, client.iv = siv, civ
	} else {
		server.salt, client.salt = siv, civ
	}
	return server, client
}

// Support is what the running kernel's TLS offload can do, found by probing.
type Support struct {
	TLS12, TLS13 map[uint16]bool // kernel cipher ids that install both ways
	Err          error           // why there is no kTLS at all (module missing, ...)
}

// Has reports whether kTLS can take a connection of this version and cipher.
func (s *Support) Has(version uint16, kc *kernelCipher) bool {
	if s == nil || kc == nil {
		return false
	}
	switch version {
	case stdtls.VersionTLS12:
		return s.TLS12[kc.id]
	case stdtls.VersionTLS13:
		return s.TLS13[kc.id]
	}
	return false
}

// Any reports whether any cipher can go to the kernel.
func (s *Support) Any() bool { return s != nil && (len(s.TLS12) > 0 || len(s.TLS13) > 0) }

func (s *Support) String() string {
	if !s.Any() {
		if s.Err != nil {
			return "kTLS: unavailable (" + s.Err.Error() + ")"
		}
		return "kTLS: unavailable"
	}
	out := "kTLS:"
	for _, v := range []struct {
		name string
		m    map[uint16]bool
	}{{"TLSv1.2", s.TLS12}, {"TLSv1.3", s.TLS13}} {
		out += " " + v.name
		for _, kc := range []*kernelCipher{kAESGCM128, kAESGCM256, kChaCha20} {
			if v.m[kc.id] {
				out += " " + kc.name
			}
		}
	}
	return out
}

var (
	probeOnce sync.Once
	probed    *Support
)

// Probe finds, once per process, which versions and ciphers the kernel takes: for
// each it installs dummy keys both ways on a connected loopback socket.
func Probe() *Support {
	probeOnce.Do(func() { probed = probe() })
	return probed
}

func probe() *Support {
	s := &Support{TLS12: map[uint16]bool{}, TLS13: map[uint16]bool{}}
	for _, version := range []uint16{tlsVersion12, tlsVersion13} {
		for _, kc := range []*kernelCipher{kAESGCM128, kAESGCM256, kChaCha20} {
			err := probeOne(version, kc)
			if err == nil {
				if version == tlsVersion12 {
					s.TLS12[kc.id] = true
				} else {
					s.TLS13[kc.id] = true
				}
				continue
			}
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EOPNOTSUPP) {
				// No ULP "tls" (module missing or CONFIG_TLS off): nothing else will work.
				if s.Err == nil && !s.Any() {
					s.Err = err
				}
			}
		}
	}
	if s.Any() {
		s.Err = nil
	}
	return s
}

// probeOne installs zero keys of one version and cipher on a fresh connected pair.
func probeOne(version uint16, kc *kernelCipher) error {
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ln)
	lo := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(ln, lo); err != nil {
		return err
	}
	if err := unix.Listen(ln, 1); err != nil {
		return err
	}
	sa, err := unix.Getsockname(ln)
	if err != nil {
		return err
	}
	cl, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cl)
	if err := unix.Connect(cl, sa); err != nil {
		return err
	}
	srv, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(srv)
	k := &trafficKeys{key: make([]byte, kc.keyLen), iv: make([]byte, 12), salt: make([]byte, 4)}
	return installKTLS(srv, version, kc, k, k)
}
