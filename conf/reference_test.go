package conf

import (
	"strings"
	"testing"
)

func TestReferenceListsEveryDirective(t *testing.T) {
	r := MustRegistry(testModule)
	ref := r.Reference()
	for _, m := range r.Modules() {
		for _, d := range m.Directives {
			if !strings.Contains(ref, "| `"+d.Name+"` |") {
				t.Errorf("reference lacks %s", d.Name)
			}
			if m == CoreModule && (d.Syntax == "" || d.Doc == "") {
				t.Errorf("core directive %s has no syntax or doc", d.Name)
			}
		}
	}
	if !strings.Contains(ref, "`error_log file \\| stderr [level];`") {
		t.Errorf("pipes in syntax not escaped:\n%s", ref)
	}
}
