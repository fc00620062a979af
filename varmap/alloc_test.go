//go:build !race

package varmap

import "testing"

// TestFindAllocs: lookups allocate nothing, a regex key's captures included (the
// race detector allocates in the regex's scratch pool, so this runs without it).
func TestFindAllocs(t *testing.T) {
	m, err := Build("$host", "v", [][2]string{{"default", "none"}, {"example.com", "exact"},
		{`~^(?<sub>\w+)\.(test|example)$`, "re"}})
	if err != nil {
		t.Fatal(err)
	}
	scratch := make([]byte, 0, 64)
	caps := make([]int, 20)
	for _, tc := range []struct{ key, want string }{{"Example.COM", "exact"}, {"abc.test", "re"}, {"nothing", "none"}} {
		key := []byte(tc.key)
		if a := testing.AllocsPerRun(100, func() {
			if r := m.Find(key, scratch, caps); m.Values[r.Value].Text != tc.want {
				t.Fatalf("%q: %q", tc.key, m.Values[r.Value].Text)
			}
		}); a != 0 {
			t.Errorf("%q: %v allocations per lookup", tc.key, a)
		}
	}
}
