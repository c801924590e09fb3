package worker

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Config's doc states each default for its readers; the value itself is
// written once, where the flags and the engine read it. The doc must say
// what the flag of the same name shows.
func TestConfigDocStatesTheDefaults(t *testing.T) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	newProgram(Config{}).registerFlags(fs)
	file, err := parser.ParseFile(token.NewFileSet(), "worker.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
			for _, f := range ts.Type.(*ast.StructType).Fields.List {
				for _, name := range f.Names {
					docs[name.Name] = strings.Join(strings.Fields(f.Doc.Text()), " ")
				}
			}
		}
		return true
	})
	stated := regexp.MustCompile(`\((\d+)( s| min)?\)`)
	for field, name := range map[string]string{"Concurrency": "concurrency", "Grace": "grace", "CallTimeout": "call-timeout", "MaxParallel": "max-parallel", "Replicas": "replicas"} {
		m := stated.FindStringSubmatch(docs[field])
		if m == nil {
			t.Errorf("Config.%s's doc states no default: %q", field, docs[field])
			continue
		}
		want := fs.Lookup(name).DefValue
		got := m[1]
		if unit := strings.TrimSpace(m[2]); unit != "" {
			d, _ := time.ParseDuration(m[1] + strings.TrimSuffix(unit, "in"))
			got = d.String()
		}
		if got != want {
			t.Errorf("Config.%s's doc says %s, --%s's default is %s", field, m[0], name, want)
		}
	}
}
