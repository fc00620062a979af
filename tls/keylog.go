package tls

import (
	"bytes"
	"encoding/hex"
)

// keyLog receives crypto/tls's key log lines (NSS format) for the connection
// whose handshake runs on the loop now: the secrets kTLS needs. Only layers that
// can use kTLS set it.
type keyLog struct{ l *Layer }

// Write implements io.Writer; crypto/tls calls it once per line.
func (k *keyLog) Write(p []byte) (int, error) {
	c := k.l.cur
	if c == nil {
		return len(p), nil
	}
	label, rest, _ := bytes.Cut(bytes.TrimRight(p, "\n"), []byte(" "))
	random, secretHex, ok := bytes.Cut(rest, []byte(" "))
	if !ok || hex.DecodedLen(len(random)) != 32 {
		return len(p), nil
	}
	var cr [32]byte
	if _, err := hex.Decode(cr[:], random); err != nil {
		return len(p), nil
	}
	secret := make([]byte, hex.DecodedLen(len(secretHex)))
	if _, err := hex.Decode(secret, secretHex); err != nil {
		return len(p), nil
	}
	c.clientRandom = cr
	switch string(label) {
	case "CLIENT_RANDOM": // TLS 1.2: the master secret
		c.master = secret
	case "CLIENT_TRAFFIC_SECRET_0":
		c.clientSecret = secret
	case "SERVER_TRAFFIC_SECRET_0":
		c.serverSecret = secret
		// From here on the server writes under the application key: session
		// tickets sent now move kTLS's transmit sequence.
		c.appSecrets = true
	default:
		clear(secret)
	}
	return len(p), nil
}
