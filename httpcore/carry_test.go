package httpcore

import "testing"

func TestUncarry(t *testing.T) {
	r := &Request{}
	r.Carry([]byte("Expires"), []byte("x"))
	r.Carry([]byte("Set-Cookie"), []byte("a=1"))
	r.Carry([]byte("cache-control"), []byte("private"))
	r.Carry([]byte("EXPIRES"), []byte("y"))
	r.Uncarry("Expires")
	if got := string(r.carried); got != "Set-Cookie: a=1\r\ncache-control: private\r\n" {
		t.Fatalf("%q", got)
	}
	r.Uncarry("Cache-Control")
	r.Uncarry("Set-Cookie")
	if len(r.carried) != 0 {
		t.Fatalf("%q", r.carried)
	}
}
