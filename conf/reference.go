package conf

import (
	"sort"
	"strings"
)

// Reference renders the registry's directives as the README's Markdown table, so the
// documentation is generated from the same table the parser uses and cannot drift.
func (r *Registry) Reference() string {
	var b strings.Builder
	for _, m := range r.modules {
		if len(m.Directives) == 0 {
			continue
		}
		b.WriteString("#### Module `" + m.Name + "`\n\n")
		b.WriteString("| Directive | Syntax | Default | Context | Description |\n")
		b.WriteString("|---|---|---|---|---|\n")
		ds := append([]Directive(nil), m.Directives...)
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].Name < ds[j].Name })
		for _, d := range ds {
			def := "—"
			if d.Default != "" {
				def = "`" + cell(d.Default) + "`"
			}
			doc := d.Doc
			if d.NoEffect {
				doc = "**Accepted without effect**: " + doc
			}
			b.WriteString("| `" + d.Name + "` | `" + cell(d.Syntax) + "` | " + def + " | " +
				d.Contexts.String() + " | " + cell(doc) + " |\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
