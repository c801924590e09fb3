package deployments_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.yaml.in/yaml/v3"

	"github.com/agentbull/toolruntime/protocol"
)

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, path)))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no YAML document", path)
	}
	return docs
}

// get walks a decoded YAML or JSON value: get(v, "spec", "template", 0, …).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		out = append(out, str(e))
	}
	return out
}

// workerFlags are the flags cmd/worker defines: package worker's, in
// worker/flags.go, (the sandbox's) worker/sandbox.go, (the engine's)
// internal/engine/config.go and (the connection flags)
// internal/natsconn/flags.go.
func workerFlags(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`fs\.\w+Var\(&[^,]+, "([a-z0-9-]+)"`)
	flags := map[string]bool{}
	for _, file := range []string{"../worker/flags.go", "../worker/sandbox.go", "../internal/engine/config.go", "../internal/natsconn/flags.go"} {
		for _, m := range re.FindAllStringSubmatch(string(readFile(t, file)), -1) {
			flags[m[1]] = true
		}
	}
	if len(flags) < 10 {
		t.Fatalf("found only %d flags in worker/flags.go and the others", len(flags))
	}
	return flags
}

// checkArgs checks that every --flag of args is a worker flag, and returns
// the flags' values.
func checkArgs(t *testing.T, where string, args []string, flags map[string]bool) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for _, a := range args {
		name, val, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !flags[name] {
			t.Errorf("%s: %q is not a flag of cmd/worker", where, a)
		}
		vals[name] = val
	}
	return vals
}

// checkEnv checks that a WORKER_* variable names a worker flag.
func checkEnv(t *testing.T, where, name string, flags map[string]bool) {
	t.Helper()
	switch {
	case name == "NATS_URL" || name == "GOMEMLIMIT":
	case strings.HasPrefix(name, "WORKER_"):
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "WORKER_"), "_", "-"))
		if !flags[flag] {
			t.Errorf("%s: %s names no flag of cmd/worker (--%s)", where, name, flag)
		}
	default:
		t.Errorf("%s: %s is read by nothing", where, name)
	}
}

func duration(t *testing.T, where, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, s, err)
	}
	return d
}

// passwordVars are the environment variables the NATS configurations
// read.
func passwordVars(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`password: \$([A-Z_]+)`)
	var vars []string
	for _, m := range re.FindAllStringSubmatch(string(readFile(t, "nats/accounts.conf")), -1) {
		vars = append(vars, m[1])
	}
	slices.Sort(vars)
	if len(vars) < 4 {
		t.Fatalf("accounts.conf reads %v", vars)
	}
	return vars
}

// goModVersion returns the version of a module required by go.mod.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + ` v(\S+)`)
	m := re.FindStringSubmatch(string(readFile(t, "../go.mod")))
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return m[1]
}

// TestYAMLParses parses every YAML file of deployments/ and the Taskfile,
// every document of each.
func TestYAMLParses(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			yamlDocs(t, path)
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	yamlDocs(t, "../Taskfile.yml")
	if n < 8 {
		t.Errorf("only %d YAML files", n)
	}
}

// TestCompose checks the Compose file: three NATS nodes from the cluster
// configurations, with the passwords they need, of the server version the
// tests run; workers built from the Dockerfile that join all three with
// replicas 3 and the worker user.
func TestCompose(t *testing.T) {
	flags := workerFlags(t)
	doc := yamlDocs(t, "compose.yaml")[0]
	services, _ := doc["services"].(map[string]any)
	wantVars := passwordVars(t)
	natsVersion := goModVersion(t, "github.com/nats-io/nats-server/v2")
	for _, n := range []string{"n1", "n2", "n3"} {
		svc := services[n]
		if svc == nil {
			t.Fatalf("no service %s", n)
		}
		image := str(get(svc, "image"))
		if !strings.Contains(image, "nats:"+natsVersion) {
			t.Errorf("%s: image %s, want nats:%s… (the server version of go.mod, which the tests run)", n, image, natsVersion)
		}
		cmd := strings.Join(strs(get(svc, "command")), " ")
		conf := "/etc/turn-nats/cluster/" + n + ".conf"
		if !strings.Contains(cmd, "--config "+conf) {
			t.Errorf("%s: command %q does not load %s", n, cmd, conf)
		}
		if !slices.Contains(strs(get(svc, "volumes")), "./nats:/etc/turn-nats:ro") {
			t.Errorf("%s: volumes %v do not mount ./nats", n, get(svc, "volumes"))
		}
		env, _ := get(svc, "environment").(map[string]any)
		for _, v := range wantVars {
			if env[v] == nil {
				t.Errorf("%s: no %s in the environment", n, v)
			}
		}
		if get(svc, "healthcheck", "test") == nil {
			t.Errorf("%s: no healthcheck", n)
		}
	}
	w := services["worker"]
	if str(get(w, "build", "dockerfile")) != "deployments/Dockerfile" || str(get(w, "build", "context")) != ".." {
		t.Errorf("worker build %v", get(w, "build"))
	}
	args := checkArgs(t, "compose worker", strs(get(w, "command")), flags)
	if args["nats-url"] != "nats://n1:4222,nats://n2:4222,nats://n3:4222" {
		t.Errorf("worker --nats-url %q", args["nats-url"])
	}
	if args["replicas"] != "3" {
		t.Errorf("worker --replicas %q", args["replicas"])
	}
	if _, port, _ := net.SplitHostPort(args["http-addr"]); port != "9090" {
		t.Errorf("worker --http-addr %q", args["http-addr"])
	}
	env, _ := get(w, "environment").(map[string]any)
	for name := range env {
		checkEnv(t, "compose worker", name, flags)
	}
	if str(env["WORKER_USER"]) != "worker" || env["WORKER_PASSWORD"] == nil {
		t.Errorf("worker credentials %v", env)
	}
	if r, _ := get(w, "deploy", "replicas").(int); r < 2 {
		t.Errorf("worker replicas %v, want several", get(w, "deploy", "replicas"))
	}
	if stop := duration(t, "stop_grace_period", str(get(w, "stop_grace_period"))); stop <= duration(t, "--grace", args["grace"]) {
		t.Errorf("worker stop_grace_period %s is not longer than --grace %s", stop, args["grace"])
	}

	// env.example sets every password.
	example := string(readFile(t, "env.example"))
	for _, v := range wantVars {
		if !regexp.MustCompile(`(?m)^` + v + `=\S+`).MatchString(example) {
			t.Errorf("env.example does not set %s", v)
		}
	}
}

// TestKubernetes checks the manifests: what kustomize applies, the
// Deployment's probes, grace period, security and credentials, the
// budget's and the metrics Service's selectors, and the ScaledObject's
// triggers on the two work consumers.
func TestKubernetes(t *testing.T) {
	flags := workerFlags(t)
	byKind := map[string]map[string]any{}
	files, _ := filepath.Glob("k8s/*.yaml")
	for _, f := range files {
		for _, doc := range yamlDocs(t, f) {
			kind := str(doc["kind"])
			if kind == "" {
				t.Errorf("%s: a document without kind", f)
			}
			if byKind[kind] != nil {
				t.Errorf("two %s manifests", kind)
			}
			byKind[kind] = doc
		}
	}
	for _, kind := range []string{"Kustomization", "Deployment", "PodDisruptionBudget", "ScaledObject", "Secret", "ConfigMap", "Service"} {
		if byKind[kind] == nil {
			t.Fatalf("no %s manifest", kind)
		}
	}
	// kustomize applies everything but the example Secret.
	resources := strs(byKind["Kustomization"]["resources"])
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" || base == "secret.example.yaml" {
			if slices.Contains(resources, base) {
				t.Errorf("kustomization lists %s", base)
			}
			continue
		}
		if !slices.Contains(resources, base) {
			t.Errorf("kustomization does not list %s", base)
		}
	}

	dep := byKind["Deployment"]
	pod := get(dep, "spec", "template")
	podLabels, _ := get(pod, "metadata", "labels").(map[string]any)
	selects := func(what string, sel any) {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range m {
			if podLabels[k] != v {
				t.Errorf("%s selector %s=%v does not match the pods' labels %v", what, k, v, podLabels)
			}
		}
	}
	selects("Deployment", get(dep, "spec", "selector", "matchLabels"))
	selects("PodDisruptionBudget", get(byKind["PodDisruptionBudget"], "spec", "selector", "matchLabels"))
	selects("Service", get(byKind["Service"], "spec", "selector"))

	c := get(pod, "spec", "containers", 0)
	args := checkArgs(t, "Deployment args", strs(get(c, "args")), flags)
	_, httpPort, _ := net.SplitHostPort(args["http-addr"])
	if httpPort == "" {
		t.Fatalf("the Deployment does not set --http-addr: %v", args)
	}
	if p := str(get(c, "ports", 0, "containerPort")); p != httpPort || str(get(c, "ports", 0, "name")) != "http" {
		t.Errorf("container port %s (%v), --http-addr port %s", p, get(c, "ports", 0, "name"), httpPort)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"} {
		if got := str(get(c, probe, "httpGet", "path")); got != path {
			t.Errorf("%s path %q, want %s", probe, got, path)
		}
		if port := str(get(c, probe, "httpGet", "port")); port != "http" {
			t.Errorf("%s port %q", probe, port)
		}
	}
	grace := duration(t, "--grace", args["grace"])
	if tg, _ := get(pod, "spec", "terminationGracePeriodSeconds").(int); time.Duration(tg)*time.Second <= grace {
		t.Errorf("terminationGracePeriodSeconds %d is not longer than --grace %s", tg, grace)
	}
	if get(dep, "spec", "replicas") != nil {
		t.Error("the Deployment sets replicas; the ScaledObject owns them")
	}
	for _, check := range []struct {
		path []any
		want string
	}{
		{[]any{"spec", "securityContext", "runAsNonRoot"}, "true"},
		{[]any{"spec", "securityContext", "runAsUser"}, "65532"},
		{[]any{"spec", "automountServiceAccountToken"}, "false"},
		{[]any{"spec", "containers", 0, "securityContext", "readOnlyRootFilesystem"}, "true"},
		{[]any{"spec", "containers", 0, "securityContext", "allowPrivilegeEscalation"}, "false"},
		{[]any{"spec", "containers", 0, "securityContext", "capabilities", "drop", 0}, "ALL"},
	} {
		if got := str(get(pod, check.path...)); got != check.want {
			t.Errorf("pod %v is %q, want %s", check.path, got, check.want)
		}
	}
	if get(c, "resources", "requests", "cpu") == nil || get(c, "resources", "limits", "memory") == nil {
		t.Errorf("resources %v", get(c, "resources"))
	}
	// Credentials from the Secret, settings from the ConfigMap.
	secret := byKind["Secret"]
	secretName := str(get(secret, "metadata", "name"))
	creds := map[string]string{}
	env, _ := get(c, "env").([]any)
	for _, e := range env {
		name := str(get(e, "name"))
		checkEnv(t, "Deployment env", name, flags)
		if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil {
			if str(get(ref, "name")) != secretName || get(secret, "stringData", str(get(ref, "key"))) == nil {
				t.Errorf("%s comes from %v, which the Secret %s does not hold", name, ref, secretName)
			}
			creds[name] = str(get(ref, "key"))
		}
	}
	if creds["WORKER_USER"] == "" || creds["WORKER_PASSWORD"] == "" {
		t.Errorf("the NATS credentials do not come from the Secret: %v", creds)
	}
	if str(get(secret, "stringData", creds["WORKER_USER"])) != "worker" {
		t.Errorf("the Secret's user is %v", get(secret, "stringData", creds["WORKER_USER"]))
	}
	cm := byKind["ConfigMap"]
	if got := str(get(c, "envFrom", 0, "configMapRef", "name")); got != str(get(cm, "metadata", "name")) {
		t.Errorf("envFrom %q, ConfigMap %q", got, get(cm, "metadata", "name"))
	}
	data, _ := get(cm, "data").(map[string]any)
	for name := range data {
		checkEnv(t, "ConfigMap", name, flags)
	}
	if !strings.HasPrefix(str(data["NATS_URL"]), "nats://") {
		t.Errorf("ConfigMap NATS_URL %v", data["NATS_URL"])
	}

	// KEDA: both work consumers, in the account of the NATS configuration.
	so := byKind["ScaledObject"]
	if got := str(get(so, "spec", "scaleTargetRef", "name")); got != str(get(dep, "metadata", "name")) {
		t.Errorf("ScaledObject targets %q", got)
	}
	if min, _ := get(so, "spec", "minReplicaCount").(int); min < 1 {
		t.Errorf("minReplicaCount %v: catalogs and cancels need a worker at all times", get(so, "spec", "minReplicaCount"))
	}
	setPasswords(t)
	opts, err := server.ProcessConfigFile("nats/single.conf")
	if err != nil {
		t.Fatal(err)
	}
	accounts := map[string]bool{}
	for _, a := range opts.Accounts {
		accounts[a.Name] = true
	}
	want := map[string]string{protocol.StreamCalls: protocol.ConsumerCalls, protocol.StreamTasks: protocol.ConsumerTasks}
	got := map[string]string{}
	triggers, _ := get(so, "spec", "triggers").([]any)
	for i, tr := range triggers {
		if str(get(tr, "type")) == "prometheus" {
			// The fair-share backlog (TURN_BACKLOG), from the workers' gauge.
			if q := str(get(tr, "metadata", "query")); !strings.Contains(q, "turn_worker_fair_backlog") {
				t.Errorf("trigger %d: prometheus query %q does not read turn_worker_fair_backlog", i, q)
			}
			if n, err := strconv.Atoi(str(get(tr, "metadata", "threshold"))); err != nil || n < 1 {
				t.Errorf("trigger %d: threshold %v", i, get(tr, "metadata", "threshold"))
			}
			continue
		}
		if str(get(tr, "type")) != "nats-jetstream" {
			t.Errorf("trigger %d is %v", i, get(tr, "type"))
			continue
		}
		md := get(tr, "metadata")
		got[str(get(md, "stream"))] = str(get(md, "consumer"))
		if acc := str(get(md, "account")); !accounts[acc] {
			t.Errorf("trigger %d: account %q is not an account of nats/accounts.conf", i, acc)
		}
		if _, port, err := net.SplitHostPort(str(get(md, "natsServerMonitoringEndpoint"))); err != nil || port != strconv.Itoa(opts.HTTPPort) {
			t.Errorf("trigger %d: natsServerMonitoringEndpoint %v, want the monitoring port %d", i, get(md, "natsServerMonitoringEndpoint"), opts.HTTPPort)
		}
		if n, err := strconv.Atoi(str(get(md, "lagThreshold"))); err != nil || n < 1 {
			t.Errorf("trigger %d: lagThreshold %v", i, get(md, "lagThreshold"))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ScaledObject scales on %v, want %v", got, want)
	}
	// The workers KEDA adds must find steps to pull: the fleet-wide bound on
	// steps in flight covers maxReplicaCount x lagThreshold.
	maxPending := 1 << 16 // the flag's default
	if v, ok := data["WORKER_MAX_ACK_PENDING"]; ok {
		maxPending, _ = strconv.Atoi(str(v))
	}
	maxReplicas, _ := get(so, "spec", "maxReplicaCount").(int)
	for i, tr := range triggers {
		lag, _ := strconv.Atoi(str(get(tr, "metadata", "lagThreshold")))
		if maxReplicas*lag > maxPending {
			t.Errorf("trigger %d: maxReplicaCount %d x lagThreshold %d > max ack pending %d", i, maxReplicas, lag, maxPending)
		}
	}
}

// dockerfileLine is one instruction of a Dockerfile.
type dockerfileLine struct {
	cmd, args string
}

// parseDockerfile returns the instructions of each stage, continuation
// lines joined and comments dropped.
func parseDockerfile(t *testing.T, path string) [][]dockerfileLine {
	t.Helper()
	var stages [][]dockerfileLine
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, path)))
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" || len(stages) == 0 {
			stages = append(stages, nil)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], dockerfileLine{cmd, strings.TrimSpace(args)})
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// TestDockerfile checks the image: a Go build stage of the go.mod's Go
// version that builds cmd/worker statically with the version stamped, and
// a final stage that runs it as a non-root user with the metrics port.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "Dockerfile")
	if len(stages) != 3 { // the ARG before the first FROM, build, final
		t.Fatalf("%d stages", len(stages))
	}
	args := map[string]string{}
	for _, st := range stages {
		for _, l := range st {
			if l.cmd == "ARG" {
				if k, v, ok := strings.Cut(l.args, "="); ok {
					args[k] = v
				}
			}
		}
	}
	goMod := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(readFile(t, "../go.mod")))
	if goMod == nil || !strings.HasPrefix(args["GO_VERSION"], goMod[1]) {
		t.Errorf("GO_VERSION %q, go.mod wants go %v", args["GO_VERSION"], goMod)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(args["VERSION"]) {
		t.Errorf("VERSION default %q is not a SemVer (the micro service needs one)", args["VERSION"])
	}
	if !regexp.MustCompile(`(?m)^var version = `).Match(readFile(t, "../cmd/worker/main.go")) {
		t.Error("cmd/worker has no var version for -X main.version")
	}

	build, final := stages[1], stages[2]
	if !strings.Contains(build[0].args, "golang:${GO_VERSION}") || !strings.HasSuffix(build[0].args, "AS build") {
		t.Errorf("build stage FROM %s", build[0].args)
	}
	var goBuild string
	for _, l := range build {
		if l.cmd == "RUN" && strings.Contains(l.args, "go build") {
			goBuild = l.args
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`, "./cmd/worker", "-o /out/toolruntime-worker"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("go build %q lacks %s", goBuild, want)
		}
	}

	final0 := final[0].args
	if !strings.HasPrefix(final0, "gcr.io/distroless/static") || !strings.Contains(final0, "nonroot") {
		t.Errorf("final stage FROM %s", final0)
	}
	last := map[string]string{}
	env := map[string]string{}
	for _, l := range final {
		last[l.cmd] = l.args
		if l.cmd == "ENV" {
			for _, kv := range strings.Fields(l.args) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	user := last["USER"]
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("final stage USER %q, want a numeric non-root user", user)
	}
	if last["COPY"] != "--from=build /out/toolruntime-worker /usr/local/bin/toolruntime-worker" {
		t.Errorf("COPY %s", last["COPY"])
	}
	if last["ENTRYPOINT"] != `["/usr/local/bin/toolruntime-worker"]` {
		t.Errorf("ENTRYPOINT %s", last["ENTRYPOINT"])
	}
	_, port, _ := net.SplitHostPort(env["WORKER_HTTP_ADDR"])
	if last["EXPOSE"] != "9090" || port != "9090" {
		t.Errorf("EXPOSE %s, WORKER_HTTP_ADDR %s", last["EXPOSE"], env["WORKER_HTTP_ADDR"])
	}
	flags := workerFlags(t)
	for k := range env {
		checkEnv(t, "Dockerfile ENV", k, flags)
	}

	// The build context keeps what the build needs.
	ignore := string(readFile(t, "Dockerfile.dockerignore"))
	for _, needed := range []string{"go.mod", "go.sum", "cmd", "internal"} {
		if regexp.MustCompile(`(?m)^` + needed + `\b`).MatchString(ignore) {
			t.Errorf("Dockerfile.dockerignore leaves out %s", needed)
		}
	}
}

// TestTaskfile checks the cluster and worker tasks and that the existing
// ones are still there.
func TestTaskfile(t *testing.T) {
	doc := yamlDocs(t, "../Taskfile.yml")[0]
	tasks, _ := doc["tasks"].(map[string]any)
	for _, name := range []string{"run", "test", "lint", "bench", "fuzz", "load", "cli-smoke", "ci", "cluster:up", "cluster:down", "workers:up", "workers:down"} {
		if tasks[name] == nil {
			t.Errorf("Taskfile has no task %s", name)
		}
	}
	for _, script := range []string{"local/cluster.sh", "local/workers.sh"} {
		info, err := os.Stat(script)
		if err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("%s is missing or not executable (%v)", script, err)
		}
		// Every password the NATS configurations read gets a local default.
		if script == "local/cluster.sh" {
			body := string(readFile(t, script))
			for _, v := range passwordVars(t) {
				if !strings.Contains(body, "export "+v+"=") {
					t.Errorf("%s does not set %s", script, v)
				}
			}
		}
	}
}
