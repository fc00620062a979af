package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Differential tests of the request logic (rewrite, if, set, captures, map, geo,
// split_clients): numaproxy and Debian's nginx run the same http block, a table of
// requests goes to both, and the status, the Location, the response's X- fields and
// what the upstream received (it echoes its request) must be equal.

// echoRequestBackend answers every request with the request it received: method, URI
// and the X- fields, sorted; with "redirect" in the arguments it answers 302 to its
// own address and the path.
func echoRequestBackend(t *testing.T) *backend {
	return newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.RawQuery, "redirect") {
			w.Header().Set("Location", "http://"+r.Host+r.URL.Path)
			w.WriteHeader(302)
			return
		}
		var names []string
		for k := range r.Header {
			if strings.HasPrefix(k, "X-") || k == "Connection" || k == "Upgrade" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		fmt.Fprintf(w, "%s %s\n", r.Method, r.RequestURI)
		for _, k := range names {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ","))
		}
	})
}

// diffReq is one request of a differential table.
type diffReq struct {
	target string   // request target
	host   string   // Host ("h" when empty)
	hdr    []string // more fields, "Name: value"
	from   string   // the client address (127.0.0.x) the request comes from; "" any
}

// diffResp is what is compared of an answer.
type diffResp struct {
	status   int
	location string
	fields   string // the response's X- fields, sorted
	body     string // compared for 200 only: other bodies are each server's own pages
}

// plain is the answer as want's texts match it.
func (d diffResp) plain() string {
	return fmt.Sprintf("%d loc=%s fields=%s body=%s", d.status, d.location, d.fields, d.body)
}

func (d diffResp) String() string {
	return fmt.Sprintf("%d loc=%q fields=%q body=%q", d.status, d.location, d.fields, d.body)
}

// askRaw sends one request on a new connection and reads the answer.
func askRaw(t *testing.T, addr string, q diffReq) diffResp {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if q.from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(q.from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	host := q.host
	if host == "" {
		host = "h"
	}
	req := "GET " + q.target + " HTTP/1.1\r\nHost: " + host + "\r\n"
	for _, h := range q.hdr {
		req += h + "\r\n"
	}
	req += "Connection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", addr, q.target, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var fields []string
	for k, v := range resp.Header {
		if strings.HasPrefix(k, "X-") {
			fields = append(fields, k+": "+strings.Join(v, ","))
		}
	}
	sort.Strings(fields)
	_, port, _ := net.SplitHostPort(addr)
	out := diffResp{status: resp.StatusCode, location: strings.ReplaceAll(resp.Header.Get("Location"), ":"+port, ":PORT"),
		fields: strings.Join(fields, "; ")}
	if resp.StatusCode == 200 {
		out.body = string(body)
	}
	return out
}

// runDiff starts numaproxy and nginx on conf (ADDR stands for each one's listen
// address, UP for the upstream's) and compares their answers to reqs. want, when
// not nil, pins numaproxy's answers where a test states what nginx does.
func runDiff(t *testing.T, conf string, reqs []diffReq, want map[string]string) {
	t.Helper()
	up := echoRequestBackend(t)
	np, ng := addrFor(t), addrFor(t)
	mk := func(addr string) string {
		return strings.NewReplacer("ADDR", addr, "UP", up.Addr).Replace(conf)
	}
	startHTTP(t, mk(np), np)
	startNginx(t, mk(ng), ng)
	for _, q := range reqs {
		a, b := askRaw(t, np, q), askRaw(t, ng, q)
		if os.Getenv("DIFF_LOG") != "" {
			t.Logf("%s %s: %v", q.target, q.host, a)
		}
		if a != b {
			t.Errorf("%s (Host %s %v):\nnumaproxy %v\nnginx     %v", q.target, q.host, q.hdr, a, b)
		}
		if w, ok := want[q.target]; ok && !strings.Contains(a.plain(), w) {
			t.Errorf("%s: numaproxy %v, want it to contain %q", q.target, a, w)
		}
	}
}

// TestRewriteLikeNginx: rewrite's flags, its arguments, redirects, the 10-cycle
// limit, break, and return among the rewrite directives, at server and location
// level.
func TestRewriteLikeNginx(t *testing.T) {
	conf := `
  server {
    listen ADDR;
    server_name h;
    rewrite ^/old/(.*)$ /new/$1 permanent;
    rewrite ^/tmp/(.*)$ /new/$1 redirect;
    rewrite ^/abs/(.*)$ http://example.com/$1;
    rewrite ^/absq/(.*)$ https://example.com/$1?;
    rewrite ^/scheme/(.*)$ $scheme://other.test/$1;
    rewrite ^/lit/(.*)$ /x%41%20y%3fz%4/$1 redirect;
    rewrite ^/srv/(.*)$ /loc/$1 last;
    rewrite ^/srvbreak/(.*)$ /loc/$1 break;
    rewrite ^/chain1/(.*)$ /chain2/$1;
    rewrite ^/chain2/(.*)$ /loc/chained/$1;
    location /new/ { proxy_pass http://UP; }
    location /loc/ {
      proxy_set_header X-Uri $uri;
      proxy_set_header X-Args $args;
      proxy_pass http://UP;
    }
    location /lb/ {
      rewrite ^/lb/last/(.*)$ /loc/$1 last;
      rewrite ^/lb/break/(.*)$ /loc/$1 break;
      rewrite ^/lb/none/(.*)$ /loc/$1;
      rewrite ^/lb/args/(.*)$ /loc/$1?a=$1 last;
      rewrite ^/lb/drop/(.*)$ /loc/$1? last;
      rewrite ^/lb/both/(.*)$ /loc/$1?b=1? last;
      rewrite ^/lb/(empty)$ $arg_nothing;
      proxy_set_header X-Uri $uri;
      proxy_set_header X-Here lb;
      proxy_pass http://UP;
    }
    location /brk/ {
      rewrite ^(.*)$ /loc$1;
      break;
      rewrite ^ /never;
      proxy_set_header X-Uri $uri;
      proxy_pass http://UP;
    }
    location /ret/ {
      rewrite ^/ret/(.*)$ /x/$1;
      return 200 "uri=$uri args=$args 1=$1\n";
    }
    location /setargs/ {
      set $args "a=1&$args";
      proxy_set_header X-Args $args;
      proxy_pass http://UP;
    }
    location /setargs2/ {
      set $args "";
      proxy_pass http://UP;
    }
    location /c/ {
      rewrite ^/c/x(x*)$ /c/$1 last;
      return 200 "done $uri\n";
    }
    location /loop/ { rewrite ^ /loop/ last; }
  }`
	var reqs []diffReq
	for _, tg := range []string{"/old/a?q=1", "/tmp/b", "/abs/c?z=2", "/absq/d?z=2", "/scheme/e",
		"/srv/f?k=v", "/srvbreak/g", "/chain1/h", "/lb/last/i?q=1", "/lb/break/j?q=1", "/lb/none/k",
		"/lb/args/l?q=1", "/lb/args/l", "/lb/drop/m?q=1", "/lb/both/n?q=1", "/lb/empty", "/brk/o", "/ret/p?r=1",
		"/c/xxxxxxxxxx", "/c/xxxxxxxxxxx", "/loop/", "/old/%41%2Fb", "/old/a%20b%23c%25d%26e+f?g=1",
		"/old/a+b", "/lb/args/x%20y%26z?q=1", "/lb/args/x+y", "/lb/args/x&y", "/lit/a%20b?c=d", "/lit/e",
		"/setargs/x?b=2", "/setargs/x%20y", "/setargs2/y?q=1"} {
		reqs = append(reqs, diffReq{target: tg})
	}
	runDiff(t, conf, reqs, map[string]string{
		"/old/a?q=1":      "301 loc=http://h:PORT/new/a?q=1",
		"/c/xxxxxxxxxx":   "done /c/",
		"/c/xxxxxxxxxxx":  "500",
		"/lb/break/j?q=1": "GET /loc/j?q=1",
	})
}

// TestIfLikeNginx: each condition operator, if in a server, and the implicit
// location of an if: its add_header replacing the location's, proxy_pass inside it
// and the location's proxy_pass used from it.
func TestIfLikeNginx(t *testing.T) {
	dir := t.TempDir()
	file, sub, exe := filepath.Join(dir, "file"), filepath.Join(dir, "sub"), filepath.Join(dir, "exe")
	os.WriteFile(file, []byte("x"), 0o644)
	os.Mkdir(sub, 0o755)
	os.WriteFile(exe, []byte("x"), 0o755)
	conf := `
  server {
    listen ADDR;
    server_name redirect.test;
    if ($scheme = http) { return 301 https://$host$request_uri; }
  }
  server {
    listen ADDR;
    server_name h;
    if ($http_x_block) { return 403; }
    if ($http_x_srv ~ ^go-(.+)$) { rewrite ^ /loc/$1 last; }
    location /if/ {
      set $r "";
      if ($arg_a) { set $r "${r}var;"; }
      if ($arg_a = yes) { set $r "${r}eq;"; }
      if ($arg_a != yes) { set $r "${r}ne;"; }
      if ($arg_a ~ ^y(.)) { set $r "${r}re:$1;"; }
      if ($arg_a ~* ^Y(?<second>.)) { set $r "${r}rei:$second;"; }
      if ($arg_a !~ ^y) { set $r "${r}nre;"; }
      if ($arg_a !~* ^Y) { set $r "${r}nrei;"; }
      if ( $arg_a = "two words" ) { set $r "${r}quoted;"; }
      if (-f $arg_f) { set $r "${r}f;"; }
      if (!-f $arg_f) { set $r "${r}!f;"; }
      if (-d $arg_f) { set $r "${r}d;"; }
      if (!-d $arg_f) { set $r "${r}!d;"; }
      if (-e $arg_f) { set $r "${r}e;"; }
      if (!-e $arg_f) { set $r "${r}!e;"; }
      if (-x $arg_f) { set $r "${r}x;"; }
      if (!-x $arg_f) { set $r "${r}!x;"; }
      return 200 "r=$r\n";
    }
    location /ifp/ {
      add_header X-Outer outer;
      if ($arg_h) { add_header X-If $arg_h; }
      if ($arg_to = other) { proxy_pass http://UP; }
      if ($arg_ret) { return 200 "returned in if\n"; }
      proxy_set_header X-Where parent;
      proxy_pass http://UP;
    }
    location /ifuri/ {
      proxy_pass http://UP/base/;
      set $t 1;
      if ($t) { }
    }
    location = /ifexact {
      proxy_pass http://UP/base;
      set $t 1;
      if ($t) { }
    }
    location /ifredir/ {
      proxy_pass http://UP/r/;
      set $t 1;
      if ($t) { }
    }
    location /ifrw/ {
      if ($arg_go) { rewrite ^/ifrw/(.*)$ /loc/$1 last; }
      return 200 "no\n";
    }
    location /loc/ {
      proxy_set_header X-Uri $uri;
      proxy_pass http://UP;
    }
  }`
	conf = strings.ReplaceAll(conf, "DIR", dir)
	var reqs []diffReq
	for _, a := range []string{"", "yes", "yx", "Yz", "no", "0", "two%20words"} {
		reqs = append(reqs, diffReq{target: "/if/?a=" + a})
	}
	for _, f := range []string{file, sub, exe, dir + "/missing"} {
		reqs = append(reqs, diffReq{target: "/if/?f=" + f})
	}
	for _, tg := range []string{"/ifp/a", "/ifp/a?h=1", "/ifp/a?to=other", "/ifp/a?h=2&to=other", "/ifp/a?ret=1&h=3",
		"/ifuri/x", "/ifrw/y?go=1", "/ifrw/y", "/ifexact", "/ifexact?a=1", "/ifredir/x?redirect"} {
		reqs = append(reqs, diffReq{target: tg})
	}
	reqs = append(reqs, diffReq{target: "/a?b", host: "redirect.test"},
		diffReq{target: "/if/", hdr: []string{"X-Block: 1"}},
		diffReq{target: "/x", hdr: []string{"X-Srv: go-there"}})
	runDiff(t, conf, reqs, map[string]string{
		"/a?b":            "301 loc=https://redirect.test/a?b",
		"/if/?a=yx":       "r=var;ne;re:x;rei:x;",
		"/ifp/a?h=1":      "fields=X-If: 1 ",
		"/ifp/a?to=other": "X-Where: parent",
	})
}

// TestCapturesLikeNginx: $1..$9 and named captures from location ~ and
// server_name ~ regexes reach the upstream's fields.
func TestCapturesLikeNginx(t *testing.T) {
	conf := `
  server {
    listen ADDR;
    server_name ~^(?<sub>[a-z]+)\.(?P<zone>cap)\.test$;
    location / { return 200 "sub=$sub zone=$zone 1=$1 2=$2\n"; }
    location ~ ^/in/(\d+)$ { return 200 "sub=$sub 1=$1 2=$2\n"; }
  }
  server {
    listen ADDR;
    server_name h;
    set $srvset "server-level";
    location ~ ^/u/(?<user>[a-z]+)/(\d+)(/.*)?$ {
      proxy_set_header X-User $user;
      proxy_set_header X-Id $2;
      proxy_set_header X-Rest "$3";
      proxy_pass http://UP;
    }
    location ~* ^/CASE/(.+)$ { return 200 "case $1\n"; }
    location ~ ^/keep/(.+)$ {
      rewrite ^/keep/(a)(b)$ /keep/$2$1;
      set $after_rewrite "$1,$2";
      if ($arg_x ~ (z)) { }
      return 200 "[$after_rewrite] [$1] $uri\n";
    }
    location ~ ^/srvset/ { return 200 "[$srvset] [$1]\n"; }
    location ~ \.(?:png|jpg)$ { return 200 "image 1=$1\n"; }
  }`
	reqs := []diffReq{
		{target: "/", host: "foo.cap.test"}, {target: "/", host: "Bar.CAP.test"},
		{target: "/in/42", host: "foo.cap.test"},
		{target: "/u/ann/7/x/y"}, {target: "/u/bob/8"}, {target: "/case/MiX"}, {target: "/a.png"},
		{target: "/keep/ab"}, {target: "/keep/cd"}, {target: "/keep/ab?x=z"}, {target: "/keep/cd?x=y"}, {target: "/srvset/"},
	}
	runDiff(t, conf, reqs, map[string]string{"/u/bob/8": "X-Id: 8\nX-User: bob"})
}

// TestMapLikeNginx: the WebSocket idiom, exact, wildcard and regex keys with
// hostnames, regex captures in values, values with variables, a map of a map, and
// set's variable in another module's template.
func TestMapLikeNginx(t *testing.T) {
	conf := `
  map $http_upgrade $connection_upgrade {
    default upgrade;
    ''      close;
  }
  map $http_host $hmap {
    hostnames;
    default none;
    example.com exact;
    *.example.com wild;
    .dot.test dot;
    www.example.* tail;
    ~^(?<pre>[a-z]+)\.re\.test$ "re-$pre-$1";
  }
  map $uri $umap {
    ~^/m/(\d+)$ num$1;
    ~*^/M/CASE case;
    /m/exact exact;
    default "def $uri";
  }
  map $umap $chain { num1 one; default other; }
  map $cycle_b $cycle_a { default "x$cycle_b"; }
  map $cycle_a $cycle_b { default "y$cycle_a"; }
  server {
    listen ADDR;
    location /ws/ {
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_pass http://UP;
    }
    location = /cycle { return 200 "[$cycle_a]\n"; }
    location /m/ {
      set $up_name "app:8080";
      proxy_set_header X-Up $up_name;
      proxy_set_header X-Hmap $hmap;
      proxy_set_header X-Umap $umap;
      proxy_set_header X-Chain $chain;
      proxy_pass http://UP;
    }
  }`
	reqs := []diffReq{
		{target: "/ws/a", hdr: []string{"Upgrade: websocket"}}, {target: "/ws/b"}, {target: "/cycle"},
	}
	for _, h := range []string{"example.com", "a.example.com", "a.b.example.com", "dot.test", "x.dot.test",
		"www.example.org", "abc.re.test", "ABC.re.test", "other.test", "example.com.", "EXAMPLE.com"} {
		reqs = append(reqs, diffReq{target: "/m/1", host: h})
	}
	for _, tg := range []string{"/m/1", "/m/22", "/M/case", "/m/CASE", "/m/exact", "/m/other"} {
		reqs = append(reqs, diffReq{target: tg})
	}
	runDiff(t, conf, reqs, map[string]string{"/ws/a": "Connection: upgrade\nUpgrade: websocket"})
}

// TestGeoLikeNginx: geo by the client's address (connections from 127.0.0.x), by a
// variable with ranges, with proxy and X-Forwarded-For, and delete.
func TestGeoLikeNginx(t *testing.T) {
	conf := `
  geo $geo {
    default zero;
    127.0.0.0/24 lo24;
    127.0.0.2/32 two;
    127.0.1.0/24 one;
  }
  geo $arg_ip $geoarg {
    ranges;
    default no;
    10.0.0.0-10.0.0.255 ten;
    192.168.1.1-192.168.1.10 home;
  }
  geo $geoproxy {
    proxy 127.0.0.0/8;
    default no;
    10.1.0.0/16 tenone;
    127.0.0.0/8 lo;
  }
  geo $geodel {
    default d;
    127.0.0.0/8 lo;
    delete 127.0.0.3/32;
  }
  server {
    listen ADDR;
    location / { return 200 "geo=$geo arg=$geoarg proxy=$geoproxy del=$geodel\n"; }
  }`
	var reqs []diffReq
	for _, from := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.1.5", "127.0.2.1"} {
		reqs = append(reqs, diffReq{target: "/?from=" + from, from: from})
	}
	for _, ip := range []string{"10.0.0.7", "192.168.1.5", "192.168.1.11", "bad", "::1"} {
		reqs = append(reqs, diffReq{target: "/?ip=" + ip})
	}
	reqs = append(reqs, diffReq{target: "/xff", hdr: []string{"X-Forwarded-For: 10.1.2.3"}},
		diffReq{target: "/xff2", hdr: []string{"X-Forwarded-For: 10.1.2.3, 8.8.8.8"}})
	runDiff(t, conf, reqs, map[string]string{"/?from=127.0.0.2": "geo=two", "/xff": "proxy=tenone"})
}

// TestSplitClientsLikeNginx: many keys land in the same bucket as nginx's.
func TestSplitClientsLikeNginx(t *testing.T) {
	conf := `
  split_clients "${arg_k}AAA" $bucket {
    10%   a;
    20.5% b;
    50%   c;
    *     d;
  }
  split_clients "$arg_k" $partial {
    33.33% x;
    33.33% y;
  }
  server {
    listen ADDR;
    location / { return 200 "$bucket $partial\n"; }
  }`
	var reqs []diffReq
	for i := 0; i < 150; i++ {
		reqs = append(reqs, diffReq{target: fmt.Sprintf("/?k=key%d", i*7919)})
	}
	runDiff(t, conf, reqs, nil)
}

// TestRewriteLogAndUninitialized: rewrite_log puts each rewrite's match and result
// in the error log (nginx's notice level), and a variable that only set gives a
// value, used before it got one, is empty with nginx's warning unless
// uninitialized_variable_warn is off.
func TestRewriteLogAndUninitialized(t *testing.T) {
	addr := addrFor(t)
	in := startHTTP(t, `
  server {
    listen `+addr+`;
    rewrite_log on;
    location /a/ {
      rewrite ^/a/(.*)$ /b/$1;
      return 200 "[$late]\n";
    }
    location /q/ {
      uninitialized_variable_warn off;
      return 200 "[$quiet]\n";
    }
    location /set/ { set $late x; set $quiet y; }
  }`, addr)
	for _, tc := range [][2]string{{"/a/x?k=v", "[]\n"}, {"/q/", "[]\n"}} {
		if r := askRaw(t, addr, diffReq{target: tc[0]}); r.status != 200 || r.body != tc[1] {
			t.Errorf("%s: %v", tc[0], r)
		}
	}
	in.waitLog(`[notice] `) // the level nginx logs rewrite_log at
	in.waitLog(`"^/a/(.*)$" matches "/a/x"`)
	in.waitLog(`rewritten data: "/b/x", args: "k=v"`)
	in.waitLog(`[warn] `)
	in.waitLog(`using uninitialized "late" variable`)
	if fileContains(in.path("logs/error.log"), `"quiet`) {
		t.Error("uninitialized_variable_warn off still warns")
	}
}
