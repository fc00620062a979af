package static

import (
	"errors"
	"testing"
)

func TestMapURI(t *testing.T) {
	cfg := mustConf(t, `http { server {
		root /srv/www/;
		location /a/ { alias /data/a/; location /a/b/ { } }
		location /i { alias /data/i/; }
		location /nos/ { alias /data/nos; }
		location = /one { alias /data/one.txt; }
		location ~ ^/re/(.*)$ { alias /data/re/$1; }
		location /v/ { root $host/v; }
		location /abs/ { root /x/$host; }
		location /slash/ { root /; }
		location /rel/ { root www/../x/; }
	} }`)
	srv := cfg.HTTP.Servers[0]
	locs := srv.Locations
	vars := mapVars{"host": "rel", "1": "cap.txt"}
	tests := []struct {
		lc       *LocConf
		uri      string
		addURI   bool
		want     string
		wantRoot int
		err      error
	}{
		{ServerConf(srv), "/x/y.txt", false, "/srv/www/x/y.txt", 8, nil},
		{ServerConf(srv), "/", false, "/srv/www/", 8, nil},
		{ConfOf(locs[0]), "/a/b.txt", false, "/data/a/b.txt", 8, nil},
		{ConfOf(locs[0]), "/a/", false, "/data/a/", 8, nil},
		{ConfOf(locs[0].Locations[0]), "/a/b/c", false, "/data/a/b/c", 8, nil}, // the nested location inherits the alias
		{ConfOf(locs[1]), "/i/x", false, "/data/i//x", 8, nil},
		{ConfOf(locs[1]), "/ix", false, "/data/i/x", 8, nil},
		{ConfOf(locs[1]), "/i../secret", false, "", 0, ErrOutsideRoot}, // nginx: /data/secret
		{ConfOf(locs[1]), "/i..", false, "", 0, ErrOutsideRoot},
		{ConfOf(locs[1]), "/i..x", false, "/data/i/..x", 8, nil},
		{ConfOf(locs[2]), "/nos/x", false, "/data/nosx", 9, nil}, // nginx's trailing-slash mismatch
		{ConfOf(locs[3]), "/one", false, "/data/one.txt", 13, nil},
		{ConfOf(locs[4]), "/re/cap.txt", false, "/data/re/cap.txt", 16, nil},
		{ConfOf(locs[4]), "/re/cap.txt", true, "/data/re/cap.txt/re/cap.txt", 16, nil},
		{ConfOf(locs[5]), "/v/f", false, cfg.Prefix + "/rel/v/v/f", len(cfg.Prefix) + 6, nil},
		{ConfOf(locs[6]), "/abs/f", false, "/x/rel/abs/f", 6, nil},
		{ConfOf(locs[7]), "/slash/f", false, "/slash/f", 0, nil},
		{ConfOf(locs[8]), "/rel/f", false, cfg.Prefix + "/www/../x/rel/f", len(cfg.Prefix) + 9, nil},
		{ServerConf(srv), "/../etc/passwd", false, "", 0, ErrBadURI},
		{ServerConf(srv), "/a/..", false, "", 0, ErrBadURI},
		{ServerConf(srv), "/a\x00b", false, "", 0, ErrBadURI},
		{ServerConf(srv), "/a..b/.../c.", false, "/srv/www/a..b/.../c.", 8, nil},
	}
	for _, tt := range tests {
		path, root, err := MapURI([]byte("keep:"), tt.lc, []byte(tt.uri), vars, tt.addURI)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: err %v, want %v", tt.uri, err, tt.err)
			continue
		}
		if string(path[:5]) != "keep:" {
			t.Errorf("%s: dst overwritten: %q", tt.uri, path)
		}
		if err == nil && (string(path[5:]) != tt.want || root != tt.wantRoot) {
			t.Errorf("%s: %q root %d, want %q root %d", tt.uri, path[5:], root, tt.want, tt.wantRoot)
		}
	}
	if got := string(DocumentRoot(nil, ConfOf(locs[5]), vars)); got != cfg.Prefix+"/rel/v" {
		t.Errorf("$document_root %q", got)
	}
}

func TestExten(t *testing.T) {
	for uri, want := range map[string]string{
		"/a.txt": "txt", "/a.tar.gz": "gz", "/.bashrc": "", "/x/.b": "", "/a.": "", "/a": "", "/a.b/c": "",
		"/a..b": "b", "/d.x/": "", "/": "", "/ab.C": "C",
	} {
		if got := string(Exten([]byte(uri))); got != want {
			t.Errorf("Exten(%q) = %q, want %q", uri, got, want)
		}
	}
}
