package tls

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	stdtls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"os"
)

// loadKeyPair is tls.LoadX509KeyPair with encrypted keys opened by one of
// passwords (ssl_password_file).
func loadKeyPair(certFile, keyFile string, passwords [][]byte) (stdtls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return stdtls.Certificate{}, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return stdtls.Certificate{}, err
	}
	if keyPEM, err = decryptKeyPEM(keyPEM, passwords); err != nil {
		return stdtls.Certificate{}, err
	}
	return stdtls.X509KeyPair(certPEM, keyPEM)
}

// decryptKeyPEM returns the first private key of data, decrypted if it is
// encrypted; data itself when it is not.
func decryptKeyPEM(data []byte, passwords [][]byte) ([]byte, error) {
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return data, nil // no encrypted key: X509KeyPair says what is wrong
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			if len(passwords) == 0 {
				return nil, errNoPassword
			}
			for _, p := range passwords {
				if der, err := decryptPKCS8(b.Bytes, p); err == nil {
					return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
				} else if errors.Is(err, errUnsupportedEncryption) {
					return nil, err
				}
			}
			return nil, errNoPassword
		case x509.IsEncryptedPEMBlock(b): //nolint:staticcheck // OpenSSL's legacy "Proc-Type: 4,ENCRYPTED" keys
			if len(passwords) == 0 {
				return nil, errNoPassword
			}
			for _, p := range passwords {
				der, err := x509.DecryptPEMBlock(b, p) //nolint:staticcheck // as above
				if err == nil {
					return pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: der}), nil
				}
			}
			return nil, errNoPassword
		case bytes.HasSuffix([]byte(b.Type), []byte("PRIVATE KEY")):
			return data, nil
		}
	}
}

var errUnsupportedEncryption = errors.New("encrypted key: only PBES2 with PBKDF2 (HMAC-SHA1/256/512) and AES-CBC is supported")

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// decryptPKCS8 opens an EncryptedPrivateKeyInfo (RFC 5958) with PBES2 (RFC 8018).
func decryptPKCS8(der, password []byte) ([]byte, error) {
	var info struct {
		Algo pkix.AlgorithmIdentifier
		Data []byte
	}
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("encrypted key: %w", err)
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, errUnsupportedEncryption
	}
	var params struct {
		KDF pkix.AlgorithmIdentifier
		Enc pkix.AlgorithmIdentifier
	}
	if _, err := asn1.Unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil || !params.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, errUnsupportedEncryption
	}
	var kdf struct {
		Salt   []byte
		Iter   int
		KeyLen int                      `asn1:"optional"`
		PRF    pkix.AlgorithmIdentifier `asn1:"optional"`
	}
	if _, err := asn1.Unmarshal(params.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, errUnsupportedEncryption
	}
	if kdf.Iter <= 0 || kdf.Iter > 1<<24 {
		return nil, errUnsupportedEncryption // no key file needs more; a huge count would stall the load
	}
	var h func() hash.Hash
	switch {
	case len(kdf.PRF.Algorithm) == 0 || kdf.PRF.Algorithm.Equal(oidHMACSHA1):
		h = sha1.New
	case kdf.PRF.Algorithm.Equal(oidHMACSHA256):
		h = sha256.New
	case kdf.PRF.Algorithm.Equal(oidHMACSHA512):
		h = sha512.New
	default:
		return nil, errUnsupportedEncryption
	}
	var keyLen int
	switch {
	case params.Enc.Algorithm.Equal(oidAES128CBC):
		keyLen = 16
	case params.Enc.Algorithm.Equal(oidAES192CBC):
		keyLen = 24
	case params.Enc.Algorithm.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, errUnsupportedEncryption
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Enc.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errUnsupportedEncryption
	}
	key, err := pbkdf2.Key(h, string(password), kdf.Salt, kdf.Iter, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	if len(info.Data) == 0 || len(info.Data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted key: bad length")
	}
	out := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, info.Data)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize || !bytes.Equal(out[len(out)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("encrypted key: wrong passphrase")
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errors.New("encrypted key: wrong passphrase")
	}
	return out, nil
}
