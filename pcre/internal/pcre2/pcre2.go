//go:build cgo

// Package pcre2 calls the system's libpcre2-8 (the library Debian's nginx links),
// loaded with dlopen, so tests can compare the translation with the real engine.
// It is for tests only: nothing in numaproxy links it.
package pcre2

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

typedef void *(*compile_fn)(const unsigned char *, size_t, uint32_t, int *, size_t *, void *);
typedef void *(*md_create_fn)(const void *, void *);
typedef int (*match_fn)(const void *, const unsigned char *, size_t, size_t, uint32_t, void *, void *);
typedef size_t *(*ovector_fn)(void *);
typedef void (*free_fn)(void *);
typedef int (*errmsg_fn)(int, unsigned char *, size_t);
typedef int (*info_fn)(const void *, uint32_t, void *);

static compile_fn p_compile;
static md_create_fn p_md_create;
static match_fn p_match;
static ovector_fn p_ovector;
static free_fn p_md_free, p_code_free;
static errmsg_fn p_errmsg;
static info_fn p_info;

static int load(void) {
	void *h = dlopen("libpcre2-8.so.0", RTLD_NOW);
	if (!h) return -1;
	p_compile = (compile_fn)dlsym(h, "pcre2_compile_8");
	p_md_create = (md_create_fn)dlsym(h, "pcre2_match_data_create_from_pattern_8");
	p_match = (match_fn)dlsym(h, "pcre2_match_8");
	p_ovector = (ovector_fn)dlsym(h, "pcre2_get_ovector_pointer_8");
	p_md_free = (free_fn)dlsym(h, "pcre2_match_data_free_8");
	p_code_free = (free_fn)dlsym(h, "pcre2_code_free_8");
	p_errmsg = (errmsg_fn)dlsym(h, "pcre2_get_error_message_8");
	p_info = (info_fn)dlsym(h, "pcre2_pattern_info_8");
	if (!p_compile || !p_md_create || !p_match || !p_ovector || !p_md_free || !p_code_free || !p_errmsg || !p_info) return -2;
	return 0;
}

static void *compile(const unsigned char *p, size_t n, uint32_t opts, int *err, size_t *off) {
	return p_compile(p, n, opts, err, off, NULL);
}
static int errmsg(int code, unsigned char *buf, size_t n) { return p_errmsg(code, buf, n); }
// 4 is PCRE2_INFO_CAPTURECOUNT.
static int capcount(void *code) { uint32_t n = 0; p_info(code, 4, &n); return (int)n; }
static void code_free(void *code) { p_code_free(code); }

// match returns pcre2_match's result and copies up to n offsets (PCRE2_UNSET as -1).
static int match(void *code, const unsigned char *s, size_t len, long *out, int n) {
	void *md = p_md_create(code, NULL);
	int rc = p_match(code, s, len, 0, 0, md, NULL);
	if (rc > 0) {
		size_t *ov = p_ovector(md);
		for (int i = 0; i < n && i < 2*rc; i++) out[i] = ov[i] == ~(size_t)0 ? -1 : (long)ov[i];
	}
	p_md_free(md);
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

const caseless = 0x00000008 // PCRE2_CASELESS

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens libpcre2-8; an error means the library is not installed.
func Load() error {
	loadOnce.Do(func() {
		if rc := C.load(); rc != 0 {
			loadErr = errors.New("libpcre2-8.so.0 cannot be loaded")
		}
	})
	return loadErr
}

// Code is a compiled PCRE2 pattern.
type Code struct {
	p    unsafe.Pointer
	ncap int
}

// Compile compiles pattern as nginx does (options 0, or PCRE2_CASELESS for "~*").
func Compile(pattern string, ci bool) (*Code, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var opts C.uint32_t
	if ci {
		opts = caseless
	}
	var errcode C.int
	var erroff C.size_t
	cp := C.CBytes([]byte(pattern + "\x00"))
	defer C.free(cp)
	code := C.compile((*C.uchar)(cp), C.size_t(len(pattern)), opts, &errcode, &erroff)
	if code == nil {
		buf := make([]byte, 256)
		C.errmsg(errcode, (*C.uchar)(unsafe.Pointer(&buf[0])), 256)
		n := 0
		for n < len(buf) && buf[n] != 0 {
			n++
		}
		return nil, fmt.Errorf("%s at offset %d", buf[:n], int(erroff))
	}
	return &Code{p: code, ncap: int(C.capcount(code))}, nil
}

// NumCaptures is PCRE2_INFO_CAPTURECOUNT.
func (c *Code) NumCaptures() int { return c.ncap }

// Free releases the pattern.
func (c *Code) Free() { C.code_free(c.p) }

// Match returns nil for no match, else the offsets of $0 ... $n (-1 when unset),
// padded with -1 up to every group.
func (c *Code) Match(subject []byte) ([]int, error) {
	n := 2 * (c.ncap + 1)
	out := make([]C.long, n)
	for i := range out {
		out[i] = -1
	}
	cs := C.CBytes(append(subject, 0))
	defer C.free(cs)
	rc := C.match(c.p, (*C.uchar)(cs), C.size_t(len(subject)), &out[0], C.int(n))
	if rc == -1 {
		return nil, nil
	}
	if rc < 0 {
		return nil, fmt.Errorf("pcre2_match: %d", int(rc))
	}
	res := make([]int, n)
	for i := range out {
		res[i] = int(out[i])
	}
	return res, nil
}
