package authbasic

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/internal/testport"
	"github.com/numaproxy/numaproxy/static"
)

const nginxBin = "/usr/sbin/nginx"

// startNginx runs Debian's nginx in the foreground on the configuration file, one
// process, and returns once it accepts on addr.
func startNginx(t *testing.T, file, addr string) {
	t.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		t.Skip("no " + nginxBin)
	}
	if os.Geteuid() != 0 {
		t.Skip("nginx's `user root;` needs root")
	}
	cmd := exec.Command(nginxBin, "-p", filepath.Dir(file)+"/", "-c", file, "-g", "master_process off;")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not start: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int { return testport.Free(t) }

// askNginx sends one request and returns the status and WWW-Authenticate.
func askNginx(t *testing.T, addr, path string, authorization []byte) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := "GET " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
	if authorization != nil {
		req += "Authorization: " + string(authorization) + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// extraLines are the file's traps, after the fixture's users.
var extraLines = "erin\n" + // no ':': nginx skips the next line for users starting with "erin"
	"erin:{PLAIN}hidden\n" +
	"erin:{PLAIN}seen\n" +
	"dup:{PLAIN}first\n" +
	"dup:{PLAIN}second\n" +
	"crlf:{PLAIN}crlf\r\n" +
	" space:{PLAIN}space\n" +
	"comment:{PLAIN}c:a comment\n" +
	"#hash:{PLAIN}h\n" +
	"\n" +
	"long:{PLAIN}" + strings.Repeat("x", 3000) + "\n" +
	"locked:!$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/\n" +
	"trail:$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/x\n" +
	"md5long:$1$saltsaltXY$qjXMvbEw8oaL.CzflDtaK/\n" +
	"bcnc:$2b$04$abcdefghijklmnopqrstuvyvPXIbu7xe6/CED2DzX8z6Si09MlzlW\n" +
	"bcok:$2b$04$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlW\n" +
	"bcjunk:$2b$04$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlWx\n" +
	"r999:$5$rounds=999$abc$\n" +
	"shanopad:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ\n" +
	"shaok:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n" +
	"desshort:abJnggxhB/yW\n" +
	"des13:abJnggxhB/yWI\n" +
	"emptyf:\n" +
	"a\nb:{PLAIN}across\n" +
	"Case:{PLAIN}case\n" +
	"last:{PLAIN}last-no-newline"

// Debian's nginx and this package, on the same file, the same configuration and the
// same Authorization headers, give the same answer (200, 401, 403 or 500) and
// the same challenge, except for the schemes numaproxy does not implement.
func TestSameAnswersAsNginx(t *testing.T) {
	dir := t.TempDir()
	fixture, users := readFixture(t)
	writeFile(t, dir, "htpasswd", string(fixture)+extraLines)
	os.MkdirAll(filepath.Join(dir, "www", "missing"), 0o755)
	os.MkdirAll(filepath.Join(dir, "www", "isdir"), 0o755)
	os.MkdirAll(filepath.Join(dir, "www", "quote"), 0o755)
	os.MkdirAll(filepath.Join(dir, "www", "off"), 0o755)
	os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
	for _, p := range []string{"ok.txt", "missing/ok.txt", "isdir/ok.txt", "quote/ok.txt", "off/ok.txt"} {
		writeFile(t, filepath.Join(dir, "www"), p, "ok\n")
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	http := fmt.Sprintf(`http {
    server {
        listen %s;
        root %s/www;
        location / { auth_basic "r"; auth_basic_user_file htpasswd; }
        location /missing/ { auth_basic "r"; auth_basic_user_file nofile; }
        location /isdir/ { auth_basic "r"; auth_basic_user_file www; }
        location /quote/ { auth_basic 'say "hi" \ ok'; auth_basic_user_file %s/htpasswd; }
        location /off/ { auth_basic off; auth_basic_user_file htpasswd; }
    }
}
`, addr, dir, dir)
	file := writeFile(t, dir, "nginx.conf", fmt.Sprintf("user root;\ndaemon off;\npid %s/logs/nginx.pid;\nerror_log %s/logs/error.log info;\nevents {}\n", dir, dir)+http)
	startNginx(t, file, addr)

	// This package's side: the same file through the directives, a real loop and
	// a verifier for the slow hashes.
	cfg, err := conf.Load(conf.Options{Registry: conf.MustRegistry(static.Module, Module), Prefix: dir, File: file})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range MainConfOf(cfg).Files() {
		f.Load(nil)
	}
	confs := map[string]*LocConf{}
	for _, l := range cfg.HTTP.Servers[0].Locations {
		confs[l.Path] = ConfOf(l)
	}
	loop := startLoop(t, -1, false)
	v, err := NewVerifier(VerifierConfig{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	checker := NewChecker(loop, v)
	var a Attempt

	type tcase struct {
		loc, path string
		auth      []byte
	}
	var cases []tcase
	add := func(user, pw string) {
		cases = append(cases, tcase{"/", "/ok.txt", basic(user, pw)})
	}
	for _, u := range users {
		add(u.name, u.password)
		add(u.name, u.password+"x")
		add(u.name, "")
		add(u.name, u.password+"\x00junk")
		add(strings.ToUpper(u.name), u.password)
		if len(u.password) > 8 {
			add(u.name, u.password[:8])
		}
	}
	for _, up := range [][2]string{
		{"erin", "hidden"}, {"erin", "seen"}, {"erinx", "seen"}, {"dup", "first"}, {"dup", "second"},
		{"crlf", "crlf"}, {" space", "space"}, {"space", "space"}, {"comment", "c"}, {"#hash", "h"},
		{"long", strings.Repeat("x", 2048-7)}, {"long", strings.Repeat("x", 3000)},
		{"locked", "password"}, {"trail", "password"}, {"md5long", "password"},
		{"bcnc", "pw"}, {"bcok", "pw"}, {"bcjunk", "pw"}, {"r999", "pw"},
		{"shanopad", "secret"}, {"shaok", "secret"}, {"desshort", "password"},
		{"des13", "password"}, {"des13", "passwordXYZ"}, {"des13", "passwor"},
		{"emptyf", ""}, {"a\nb", "across"}, {"b", "across"}, {"a", "x"},
		{"Case", "case"}, {"case", "case"}, {"last", "last-no-newline"}, {"nobody", "x"},
		{"plain:pw", "plain"}, {"plain", "pw-plain:extra"},
	} {
		add(up[0], up[1])
	}
	good := base64.StdEncoding.EncodeToString([]byte("plain:pw-plain"))
	for _, h := range []string{
		"Basic " + good, "basic " + good, "BASIC    " + good, "Basic", "Basic ", "Basic\t" + good,
		"Basic " + good + "=junk", "Basic " + strings.TrimRight(good, "="), "Basic " + good[:5] + "*" + good[6:],
		"Basic " + good[:len(good)-4] + "A", "Basic " + base64.StdEncoding.EncodeToString([]byte("plain")),
		"Basic " + base64.StdEncoding.EncodeToString([]byte(":pw-plain")), "Digest " + good, "Basicx" + good,
		"Basic " + base64.URLEncoding.EncodeToString([]byte("plain:pw-plain?>?>")),
	} {
		cases = append(cases, tcase{"/", "/ok.txt", []byte(h)})
	}
	for _, loc := range []string{"/missing/", "/isdir/", "/quote/", "/off/"} {
		for _, auth := range [][]byte{nil, basic("plain", "pw-plain"), basic("plain", "no"), basic("nobody", "x")} {
			cases = append(cases, tcase{loc, loc + "ok.txt", auth})
		}
	}
	cases = append(cases, tcase{"/", "/ok.txt", nil})

	differ := map[string]bool{}
	for _, c := range cases {
		status, challenge := askNginx(t, addr, c.path, c.auth)
		o := checkOn(t, loop, checker, &a, confs[c.loc], c.auth)
		got := o.Status()
		if got == 0 {
			got = 200
		}
		user, _, _, _ := ParseBasic(nil, c.auth)
		if fixtureUnsupported[string(user)] && status == 200 && got == 401 {
			differ[string(user)] = true // documented: numaproxy refuses these schemes
			continue
		}
		if got != status {
			t.Errorf("%s %q: nginx %d, numaproxy %d (%v)", c.path, c.auth, status, got, a.Outcome)
			continue
		}
		if status == 401 && challenge != string(confs[c.loc].Challenge) {
			t.Errorf("%s: nginx challenges with %q, numaproxy %q", c.path, challenge, confs[c.loc].Challenge)
		}
	}
	if len(differ) != len(fixtureUnsupported) {
		t.Errorf("nginx accepts %v of the schemes numaproxy refuses, want %d", differ, len(fixtureUnsupported))
	}
	t.Logf("%d requests compared", len(cases))
}

// An edit of the user file without a reload: nginx, which reads the file per
// request, sees it at once; numaproxy a second later (RecheckInterval).
func TestEditWithoutReloadAgainstNginx(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "www"), 0o755)
	os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
	writeFile(t, filepath.Join(dir, "www"), "ok.txt", "ok\n")
	users := writeFile(t, dir, "users", "ann:{PLAIN}old\n")
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	file := writeFile(t, dir, "nginx.conf", fmt.Sprintf(`user root; daemon off; pid %s/logs/nginx.pid; error_log %s/logs/error.log; events {}
http { server { listen %s; root %s/www; location / { auth_basic "r"; auth_basic_user_file users; } } }
`, dir, dir, addr, dir))
	startNginx(t, file, addr)
	lc := locConf("r", users)
	lc.File.Load(nil)
	loop := startLoop(t, -1, false)
	c := NewChecker(loop, nil)
	var a Attempt

	writeFile(t, dir, "users", "ann:{PLAIN}new\n")
	if status, _ := askNginx(t, addr, "/ok.txt", basic("ann", "new")); status != 200 {
		t.Fatalf("nginx right after the edit: %d", status)
	}
	if o := checkOn(t, loop, c, &a, lc, basic("ann", "new")); o != Unauthorized {
		t.Fatalf("numaproxy right after the edit: %v", o)
	}
	time.Sleep(RecheckInterval + 100*time.Millisecond)
	if o := checkOn(t, loop, c, &a, lc, basic("ann", "new")); o != Allowed {
		t.Fatalf("numaproxy a second after the edit: %v", o)
	}
}
