package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// toolDef is one tool of the corpus: its schema (validated by the scoring
// test, not strict) and a generator of realistic arguments.
type toolDef struct {
	name        string
	destructive bool
	schema      string
	args        func(r *rand.Rand, i int) obj
}

func one[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func some[T any](r *rand.Rand, n int, xs ...T) []any {
	out := []any{}
	for _, i := range r.Perm(len(xs))[:min(n, len(xs))] {
		out = append(out, xs[i])
	}
	return out
}

func n(i int) num { return num(fmt.Sprint(i)) }

var (
	commands = []string{
		`grep -rn "TODO" ./src --include=*.go | head -n 20`,
		`find . -name '*.log' -mtime +7 -delete`,
		"cd /srv/app && git pull --rebase && make build",
		`psql -c "SELECT count(*) FROM users WHERE created_at > now() - interval '1 day'"`,
		`awk -F'\t' '{print $2}' data.tsv | sort | uniq -c`,
		"for f in *.png; do convert \"$f\" -resize 50% \"small-$f\"; done",
		`echo "héllo wörld ☕" > /tmp/greeting.txt`,
		`sed -i 's/\bfoo\b/bar/g' src/*.py`,
		"python3 -c 'import sys; print(sys.version)'",
		`ls -la C:\Users\dev\Documents`,
		"kubectl get pods -n prod -o wide",
		"rm -rf build/ dist/ && npm ci && npm run build",
	}
	paths = []string{
		"src/handlers/user_profile.go", "README.md", "docs/naïve café.md", "/etc/nginx/conf.d/app.conf",
		"notes/2024-06-01.md", "C:\\Users\\dev\\report.txt", "web/index.html", "scripts/deploy.sh", "data/日本語.csv",
	}
	contents = []string{
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello, world\")\n}\n",
		"# Release notes\n\n- Fixed the \"retry\" bug\n- Added `--dry-run`\n\n```go\nx := map[string]int{\"a\": 1}\n```\n",
		"<div class=\"card\">\n  <h1>Welcome</h1>\n  <p>It's a <b>test</b> & more</p>\n</div>\n",
		"server {\n\tlisten 80;\n\tlocation / {\n\t\tproxy_pass http://127.0.0.1:8080;\n\t}\n}\n",
		"id,name,score\n1,Zoë,9.5\n2,O'Brien,7\n",
		"#!/bin/sh\nset -eu\necho \"deploying $1\"\nrsync -az ./dist/ \"deploy@host:/srv/$1\"\n",
		"Dear team,\n\nThe build is green again 🎉. Thanks!\n\n— Ana",
		`{"nested": "json as text", "n": [1, 2, 3]}`,
		"regex: ^\\d{3}-\\d{4}$ and \\w+@\\w+\\.com",
	}
	queries = []string{
		"golang structured concurrency patterns", "NATS JetStream ack wait vs max deliver",
		"\"exact phrase\" site:go.dev", "why does my regex \\d+ not match", "café près de la gare",
		"rust vs go for cli tools 2025", "O'Reilly kubernetes book",
	}
	sqls = []string{
		"SELECT id, email FROM users WHERE name = 'O''Brien' LIMIT 10",
		"SELECT date_trunc('day', created_at) AS d, count(*) FROM orders GROUP BY 1 ORDER BY 1 DESC",
		"UPDATE accounts SET balance = balance - 100.50 WHERE id = 42",
		"DELETE FROM sessions WHERE expires_at < now()",
		"SELECT * FROM logs WHERE message ~ '^ERROR\\s+\\d+'",
		"INSERT INTO notes (title, body) VALUES ('Q3', 'Line one\nLine two')",
	}
	texts = []string{
		"Deploy of v1.4.2 finished ✅", "Heads up: the DB migration starts at 14:00 UTC.",
		"Line one\nLine two\tTabbed", "It's done — see the \"results\" tab.", "PR #1234 is ready for review 👀",
		"Reminder: {name} owes the report", "Build failed:\n```\nexit status 2\n```",
	}
	urls = []string{
		"https://example.com/docs/page?x=1&y=two", "https://go.dev/ref/spec#Composite_literals",
		"https://api.github.com/repos/agentbull/toolruntime/issues?state=open", "http://localhost:8080/health",
		"https://en.wikipedia.org/wiki/Café",
	}
	patterns = []string{`^\d{3}-\d{4}$`, `func \w+\(ctx context\.Context`, `TODO|FIXME`, `\bpanic\(`, `[A-Z]{2,}_[A-Z]+`, `import\s+"fmt"`}
)

var catalog = []toolDef{
	{name: "run_command", destructive: true,
		schema: `{"type":"object","properties":{"command":{"type":"string","minLength":1},"timeout_seconds":{"type":"integer","minimum":1}},"required":["command"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			o := obj{{"command", one(r, commands...)}}
			if r.IntN(3) > 0 {
				o = append(o, kv{"timeout_seconds", n(one(r, 30, 120, 600, 3600))})
			}
			return o
		}},
	{name: "write_file", destructive: true,
		schema: `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"mode":{"type":"integer"},"create_dirs":{"type":"boolean"}},"required":["path","content"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			o := obj{{"path", one(r, paths...)}, {"content", one(r, contents...)}}
			if r.IntN(2) == 0 {
				o = append(o, kv{"mode", n(one(r, 420, 493, 384))}, kv{"create_dirs", r.IntN(2) == 0})
			}
			return o
		}},
	{name: "read_file",
		schema: `{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"path", one(r, paths...)}, {"offset", n(one(r, 0, 120, 2048))}, {"limit", n(one(r, 200, 1000, 50))}}
		}},
	{name: "edit_file", destructive: true,
		schema: `{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["path","old_text","new_text"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"path", one(r, paths...)}, {"old_text", one(r, "fmt.Println(\"hello\")", "\tif err != nil {\n\t\treturn err\n\t}", "<p>It's old</p>", `re.compile(r"\d+")`)},
				{"new_text", one(r, "log.Printf(\"hello %s\", name)", "\tif err != nil {\n\t\treturn fmt.Errorf(\"load: %w\", err)\n\t}", "<p>It's new</p>", `re.compile(r"\d{2,}")`)},
				{"replace_all", r.IntN(2) == 0}}
		}},
	{name: "web_search",
		schema: `{"type":"object","properties":{"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":20},"sites":{"type":"array","items":{"type":"string"}},"recency_days":{"type":["integer","null"]}},"required":["query"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			o := obj{{"query", one(r, queries...)}, {"limit", n(one(r, 5, 10, 20))}}
			if r.IntN(2) == 0 {
				o = append(o, kv{"sites", some(r, 1+r.IntN(3), "go.dev", "github.com", "pkg.go.dev", "stackoverflow.com")})
			}
			o = append(o, kv{"recency_days", one[any](r, nil, n(7), n(365))})
			return o
		}},
	{name: "web_fetch",
		schema: `{"type":"object","properties":{"url":{"type":"string"},"max_bytes":{"type":"integer"},"format":{"type":"string","enum":["markdown","text","html"]},"headers":{"type":"object","additionalProperties":{"type":"string"}}},"required":["url"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			o := obj{{"url", one(r, urls...)}, {"max_bytes", n(one(r, 200000, 65536, 1048576, 4096))}, {"format", one(r, "markdown", "text", "html")}}
			if r.IntN(2) == 0 {
				o = append(o, kv{"headers", obj{{"Accept-Language", "fr-FR,fr;q=0.9"}, {"User-Agent", "agentbull/1.0 (+https://agentbull.example)"}}})
			}
			return o
		}},
	{name: "todo_write",
		schema: `{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"content":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","completed"]}},"required":["id","content","status"],"additionalProperties":false}}},"required":["todos"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			var todos []any
			items := []string{"Read the failing test", "Fix the \"nil map\" panic", "Run go vet ./...", "Write the release note — it's short", "Ask @ana about the schema"}
			for k, j := range r.Perm(len(items))[:2+r.IntN(3)] {
				todos = append(todos, obj{{"id", fmt.Sprint(k + 1)}, {"content", items[j]}, {"status", one(r, "pending", "in_progress", "completed")}})
			}
			return obj{{"todos", todos}}
		}},
	{name: "create_schedule",
		schema: `{"type":"object","properties":{"name":{"type":"string"},"cron":{"type":"string"},"prompt":{"type":"string"},"timezone":{"type":"string"},"enabled":{"type":"boolean"},"jitter_seconds":{"type":"number"}},"required":["name","cron","prompt"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"name", one(r, "daily-report", "weekly digest", "prune_logs")}, {"cron", one(r, "0 9 * * 1-5", "*/15 * * * *", "30 2 * * 0")},
				{"prompt", one(r, "Summarize yesterday's errors.", "Post the \"on-call\" handover\nto #ops.", "Check disk usage; alert if > 90%.")},
				{"timezone", one(r, "Europe/Paris", "UTC", "America/Los_Angeles")}, {"enabled", r.IntN(4) > 0}, {"jitter_seconds", num(one(r, "0.5", "12.75", "-1.5e-3", "2.5E+2"))}}
		}},
	{name: "github_create_issue",
		schema: `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"},"body":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}},"assignees":{"type":"array","items":{"type":"string"}},"milestone":{"type":["integer","null"]}},"required":["owner","repo","title"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"owner", "agentbull"}, {"repo", one(r, "toolruntime", "gateway", "web-ui")},
				{"title", one(r, "Worker crashes on \"quoted\" input", "Regex \\d+ in filter is ignored", "Support für Umlaute", "It's slow on large files")},
				{"body", one(r, contents...)}, {"labels", some(r, r.IntN(3), "bug", "enhancement", "good first issue", "p1")},
				{"assignees", some(r, r.IntN(2), "ana", "li-wei")}, {"milestone", one[any](r, nil, n(12))}}
		}},
	{name: "sql_query",
		schema: `{"type":"object","properties":{"sql":{"type":"string"},"params":{"type":"array"},"timeout_ms":{"type":"integer"},"read_only":{"type":"boolean"}},"required":["sql"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"sql", one(r, sqls[0], sqls[1], sqls[4])}, {"params", some[any](r, r.IntN(3), n(42), "O'Brien", num("3.14"), true, nil)}, {"timeout_ms", n(one(r, 5000, 30000))}, {"read_only", true}}
		}},
	{name: "sql_execute", destructive: true,
		schema: `{"type":"object","properties":{"sql":{"type":"string"},"params":{"type":"array"},"transaction":{"type":"boolean"}},"required":["sql"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"sql", one(r, sqls[2], sqls[3], sqls[5])}, {"params", some[any](r, r.IntN(3), n(-7), "x\\y", num("0.001"), false)}, {"transaction", r.IntN(2) == 0}}
		}},
	{name: "slack_post_message",
		schema: `{"type":"object","properties":{"channel":{"type":"string"},"text":{"type":"string"},"thread_ts":{"type":["string","null"]},"unfurl_links":{"type":"boolean"}},"required":["channel","text"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"channel", one(r, "#ops", "#général", "C024BE91L")}, {"text", one(r, texts...)}, {"thread_ts", one[any](r, nil, "1718040000.123456")}, {"unfurl_links", r.IntN(2) == 0}}
		}},
	{name: "send_email", destructive: true,
		schema: `{"type":"object","properties":{"to":{"type":"array","items":{"type":"string"},"minItems":1},"cc":{"type":"array","items":{"type":"string"}},"subject":{"type":"string"},"body":{"type":"string"},"html":{"type":"boolean"}},"required":["to","subject","body"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"to", some(r, 1+r.IntN(2), "ana@example.com", "\"Li Wei\" <li@example.org>", "ops+alerts@example.net")}, {"cc", some(r, r.IntN(2), "boss@example.com")},
				{"subject", one(r, "Weekly report — week 23", "Re: \"quarterly\" numbers", "Incident 4521: résolu")}, {"body", one(r, contents[2], contents[6], texts[2])}, {"html", r.IntN(2) == 0}}
		}},
	{name: "delete_file", destructive: true,
		schema: `{"type":"object","properties":{"path":{"type":"string"},"recursive":{"type":"boolean"}},"required":["path"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"path", one(r, "/tmp/build-cache", "C:\\temp\\old logs", "data/export (1).csv", "~/.cache/pip")}, {"recursive", r.IntN(2) == 0}}
		}},
	{name: "kubectl_apply", destructive: true,
		schema: `{"type":"object","properties":{"manifest":{"type":"string"},"namespace":{"type":"string"},"dry_run":{"type":"boolean"},"prune":{"type":"boolean"}},"required":["manifest"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			m := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: " + fmt.Sprint(1+r.IntN(5)) + "\n  template:\n    spec:\n      containers:\n      - name: web\n        image: \"nginx:1.27\"\n        args: [\"--port\", \"8080\"]\n"
			return obj{{"manifest", m}, {"namespace", one(r, "prod", "staging")}, {"dry_run", r.IntN(2) == 0}, {"prune", false}}
		}},
	{name: "search_code",
		schema: `{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"glob":{"type":"string"},"case_sensitive":{"type":"boolean"},"max_results":{"type":"integer"}},"required":["pattern"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"pattern", one(r, patterns...)}, {"path", one(r, ".", "internal/", "src\\lib")}, {"glob", one(r, "*.go", "**/*.{ts,tsx}", "*_test.go")}, {"case_sensitive", r.IntN(2) == 0}, {"max_results", n(one(r, 50, 200))}}
		}},
	{name: "submit_result", destructive: true,
		schema: `{"type":"object","properties":{"result":{"type":"object"}},"required":["result"],"additionalProperties":false}`,
		args: func(r *rand.Rand, i int) obj {
			return obj{{"result", obj{{"summary", one(r, texts...)}, {"score", num(one(r, "0.93", "1", "-0.25", "7.5e-1"))}, {"tags", some(r, 2, "ok", "needs-review", "fr")}, {"passed", r.IntN(2) == 0}, {"notes", nil}}}}
		}},
}

var _ = strings.Contains
