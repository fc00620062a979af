package authbasic

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// fixturePasswords are the passwords of testdata/htpasswd that are not "pw-" + user.
var fixturePasswords = map[string]string{
	"utf8":        "pässwörd ✓",
	"colon":       "a:b:c",
	"empty":       "",
	"long-bcrypt": strings.Repeat("L", 80),
	"bsdi":        "pw-bsdi-long-password",
	"bigcrypt":    "pw-bigcrypt-long",
}

// fixtureUnsupported are the users whose scheme numaproxy refuses (nginx on Debian
// accepts them through libcrypt).
var fixtureUnsupported = map[string]bool{"yescrypt": true, "sunmd5": true, "nt": true, "bcrypt-2x": true}

type fixtureUser struct{ name, password string }

func readFixture(t testing.TB) ([]byte, []fixtureUser) {
	t.Helper()
	data, err := os.ReadFile("testdata/htpasswd")
	if err != nil {
		t.Fatal(err)
	}
	var users []fixtureUser
	for _, l := range strings.Split(string(data), "\n") {
		name, _, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		pw, ok := fixturePasswords[name]
		if !ok {
			pw = "pw-" + name
		}
		users = append(users, fixtureUser{name, pw})
	}
	return data, users
}

// One user per scheme, made by htpasswd, openssl, mkpasswd and libcrypt: each
// verifies with its password and not with others.
func TestFixtureUsers(t *testing.T) {
	data, users := readFixture(t)
	tbl, warns := ParseTable(data)
	if len(users) < 25 || tbl.Len() != len(users) {
		t.Fatalf("%d users, table has %d", len(users), tbl.Len())
	}
	if len(warns) != len(fixtureUnsupported) {
		t.Errorf("warnings: %v", warns)
	}
	schemes := map[Scheme]bool{}
	for _, u := range users {
		h := tbl.Lookup([]byte(u.name))
		if h == nil {
			t.Fatalf("user %q not found", u.name)
		}
		schemes[h.Scheme()] = true
		if fixtureUnsupported[u.name] {
			if h.Scheme() != SchemeUnsupported || h.Verify([]byte(u.password)) {
				t.Errorf("%s: %v verifies", u.name, h.Scheme())
			}
			continue
		}
		if h.Problem() != "" || !h.Verify([]byte(u.password)) {
			t.Errorf("%s (%v): password %q does not verify: %s", u.name, h.Scheme(), u.password, h.Problem())
		}
		for _, wrong := range []string{u.password + "x", "x" + u.password, strings.ToUpper(u.password), "pw-plain"} {
			// DES reads 8 characters of a password, bcrypt 72.
			if h.Scheme() == SchemeDES && len(h.field) == 13 && len(u.password) >= 8 && strings.HasPrefix(wrong, u.password) ||
				h.Scheme() == SchemeBcrypt && len(u.password) >= 72 && strings.HasPrefix(wrong, u.password) {
				continue
			}
			if wrong != u.password && h.Verify([]byte(wrong)) {
				t.Errorf("%s (%v): wrong password %q verifies", u.name, h.Scheme(), wrong)
			}
		}
	}
	for s := SchemePlain; s <= SchemeUnsupported; s++ {
		if !schemes[s] {
			t.Errorf("no user of scheme %v", s)
		}
	}
}

// What nginx passes to crypt are C strings: a NUL ends the password.
func TestPasswordEndsAtNUL(t *testing.T) {
	for _, field := range []string{"{PLAIN}secret", "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", "$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/"} {
		h := ParseHash([]byte(field))
		pw := "secret"
		if h.Scheme() == SchemeMD5Crypt {
			pw = "password"
		}
		if !h.Verify([]byte(pw+"\x00junk")) || h.Verify([]byte(pw[:3]+"\x00"+pw[3:])) {
			t.Errorf("%s: NUL handling", field)
		}
	}
}

// Fields that look like hashes but that libcrypt (or nginx) never matches: the
// checks in ParseHash say so, and no password verifies.
func TestNeverMatching(t *testing.T) {
	for field, pw := range map[string]string{
		"":                                 "",
		"{X}abc":                           "abc",
		"{plain}abc":                       "abc",    // the prefix is case-sensitive
		"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ": "secret", // padding missing
		"{SSHA}SUpRbFXKzvlvQmrA3YVu+7MyHnMZ1GQygVE": "pw-ssha",
		"{SSHA}AAAA":                                                    "",
		"$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/ ":                           "password", // the space
		"!$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/":                           "password", // a locked account
		"$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/x":                           "password",
		"$5$rounds=999$abc$":                                            "pw",
		"$6$rounds=01000$abc$":                                          "pw",
		"$2b$03$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlW":  "pw",
		"$2b$04$abcdefghijklmnopqrstuvyvPXIbu7xe6/CED2DzX8z6Si09MlzlW":  "pw", // salt not canonical
		"$2b$04$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlWx": "pw",
		"abJnggxhB/yW":                                                  "password", // 12 characters
		"a{JnggxhB/yWI":                                                 "password",
		"_J9..abcdIPPmXD22F8":                                           "password",
	} {
		h := ParseHash([]byte(field))
		if h.Problem() == "" || h.Scheme() != SchemeNone || h.Verify([]byte(pw)) {
			t.Errorf("%q: scheme %v, problem %q", field, h.Scheme(), h.Problem())
		}
	}
	// The near misses above verify once corrected.
	for field, pw := range map[string]string{
		"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=":                            "secret",
		"$1$saltsalt$qjXMvbEw8oaL.CzflDtaK/":                           "password",
		"$2b$04$abcdefghijklmnopqrstuuyvPXIbu7xe6/CED2DzX8z6Si09MlzlW": "pw",
		"abJnggxhB/yWI":        "password",
		"_J9..abcdIPPmXD22F8s": "password",
	} {
		if h := ParseHash([]byte(field)); !h.Verify([]byte(pw)) {
			t.Errorf("%q does not verify: %s", field, h.Problem())
		}
	}
}

// Fresh hashes from the tools, where they are installed (openssl is; htpasswd comes
// with apache2-utils, mkpasswd with whois): random passwords verify, others do not.
func TestToolsLive(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	tools := [][]string{
		{"openssl", "passwd", "-1"}, {"openssl", "passwd", "-apr1"}, {"openssl", "passwd", "-5"}, {"openssl", "passwd", "-6"},
		{"htpasswd", "-nbm", "u"}, {"htpasswd", "-nbs", "u"}, {"htpasswd", "-nbd", "u"}, {"htpasswd", "-nbB", "-C", "4", "u"},
		{"mkpasswd", "-m", "sha512crypt", "-R", "1234"}, {"mkpasswd", "-m", "bcrypt-a", "-R", "4"}, {"mkpasswd", "-m", "bsdicrypt"},
		{"mkpasswd", "-m", "descrypt"}, {"mkpasswd", "-m", "md5crypt"},
	}
	ran := 0
	for _, tool := range tools {
		if _, err := exec.LookPath(tool[0]); err != nil {
			continue
		}
		for range 3 {
			pw := randomString(r, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !#%&()*+,-./;<=>?@[]^_{|}~", 1+r.IntN(20))
			out, err := exec.Command(tool[0], append(tool[1:], pw)...).Output()
			if err != nil {
				t.Fatalf("%v: %v", tool, err)
			}
			field := strings.TrimSpace(string(out))
			if tool[0] == "htpasswd" {
				field = strings.TrimPrefix(field, "u:")
			}
			h := ParseHash([]byte(field))
			if !h.Verify([]byte(pw)) {
				t.Errorf("%v %q: %q does not verify (%v %s)", tool, pw, field, h.Scheme(), h.Problem())
			}
			if h.Verify([]byte(pw+"!")) && !(h.Scheme() == SchemeDES && len(pw) >= 8) {
				t.Errorf("%v: %q verifies a wrong password", tool, field)
			}
			ran++
		}
	}
	t.Logf("%d hashes from the tools", ran)
}
