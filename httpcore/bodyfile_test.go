package httpcore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClientBodyDirectives(t *testing.T) {
	cfg := mustConf(t, `events {}
http {
  client_body_buffer_size 32k;
  client_body_temp_path spool/ 1 2;
  server { listen 127.0.0.1:8080;
    location /a { }
    location /b { client_body_buffer_size 1m; client_body_temp_path /var/tmp/np; }
  }
  server { listen 127.0.0.1:8081; client_body_temp_path other; }
}`)
	a, b := lc(cfg.HTTP.Servers[0].Locations[0]), lc(cfg.HTTP.Servers[0].Locations[1])
	if a.ClientBodyBufferSize != 32<<10 || a.ClientBodyTemp.Dir != filepath.Join(cfg.Prefix, "spool") || len(a.ClientBodyTemp.Levels) != 2 {
		t.Errorf("inherited: %d %+v", a.ClientBodyBufferSize, a.ClientBodyTemp)
	}
	if b.ClientBodyBufferSize != 1<<20 || b.ClientBodyTemp.Dir != "/var/tmp/np" {
		t.Errorf("own: %d %+v", b.ClientBodyBufferSize, b.ClientBodyTemp)
	}
	if s := ServerConf(cfg.HTTP.Servers[1]); s.ClientBodyTemp.Dir != filepath.Join(cfg.Prefix, "other") {
		t.Errorf("server: %+v", s.ClientBodyTemp)
	}

	def := mustConf(t, "events {}\nhttp { server { listen 127.0.0.1:8080; location / { } } }")
	d := lc(def.HTTP.Servers[0].Locations[0])
	if d.ClientBodyBufferSize != 2*os.Getpagesize() || d.ClientBodyTemp.Dir != filepath.Join(def.Prefix, "client_body_temp") {
		t.Errorf("defaults: %d %+v", d.ClientBodyBufferSize, d.ClientBodyTemp)
	}

	for _, bad := range []string{
		"client_body_temp_path t 0;",
		"client_body_temp_path t x;",
		"client_body_temp_path t 5 6;", // 11 digits of levels: nginx allows 10
		"client_body_temp_path t 1 1 1 1;",
		"client_body_temp_path a; client_body_temp_path b;",
		"client_body_buffer_size 0;",
	} {
		if _, err := loadConf(t, "events {}\nhttp { "+bad+" }"); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestTempPathCreated: NewSnapshot makes a missing client_body_temp_path directory
// (mode 0700, the last component only, as nginx) and fails when it cannot.
func TestTempPathCreated(t *testing.T) {
	cfg := mustConf(t, "events {}\nhttp { server { listen 127.0.0.1:8080; location / { client_body_temp_path mine; } } }")
	if _, err := NewSnapshot(cfg); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"client_body_temp", "mine"} {
		st, err := os.Stat(filepath.Join(cfg.Prefix, dir))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", dir, st, err)
		}
	}
	if _, err := NewSnapshot(cfg); err != nil {
		t.Fatalf("existing directories: %v", err)
	}

	cfg = mustConf(t, "events {}\nhttp { client_body_temp_path no/such/parent; server { listen 127.0.0.1:8080; } }")
	if _, err := NewSnapshot(cfg); err == nil || !strings.Contains(err.Error(), "mkdir()") || !strings.Contains(err.Error(), "no/such/parent") {
		t.Fatalf("got %v, want mkdir() failing", err)
	}
}

// TestBodyFile: a temp file has no name from the start, takes writes and gives them
// back from any offset.
func TestBodyFile(t *testing.T) {
	dir := t.TempDir()
	f, err := openBodyFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the temp file has a name: %v", ents)
	}
	data := bytes.Repeat([]byte("0123456789"), 100000)
	for p := data; len(p) > 0; p = p[min(len(p), 7777):] {
		if err := f.write(p[:min(len(p), 7777)]); err != nil {
			t.Fatal(err)
		}
	}
	if f.size != int64(len(data)) {
		t.Fatalf("size %d, want %d", f.size, len(data))
	}
	got := make([]byte, 12345)
	if err := f.ReadAt(got, 500003); err != nil || !bytes.Equal(got, data[500003:500003+12345]) {
		t.Fatalf("readAt: %v", err)
	}
	if err := f.ReadAt(got, f.size-10); err == nil {
		t.Fatal("read past the end")
	}
	f.Close()
	if f.open {
		t.Fatal("still open")
	}
	f.Close() // twice is harmless

	if _, err := openBodyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v for a missing directory", err)
	}
}
