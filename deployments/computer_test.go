package deployments_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// homesDir is where the computer image keeps the homes' volume, and the
// homes' root beneath it (a directory the worker creates 0700 itself,
// whatever mode the volume's root has).
const (
	homesVolume = "/var/lib/toolruntime"
	homesRoot   = homesVolume + "/homes"
)

// finalStage returns the last value of each instruction of a stage, and
// its ENV variables.
func finalStage(st []dockerfileLine) (last, env map[string]string, runs []string) {
	last, env = map[string]string{}, map[string]string{}
	for _, l := range st {
		last[l.cmd] = l.args
		switch l.cmd {
		case "ENV":
			for _, kv := range strings.Fields(l.args) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		case "RUN":
			runs = append(runs, l.args)
		}
	}
	return last, env, runs
}

// TestDockerfileComputer checks the computer image: the same build as the
// distroless image; a Debian slim final stage with a shell, coreutils,
// bubblewrap, socat, tini and CA certificates; the worker as a numeric
// non-root user that owns the homes' volume; tini as the entrypoint, so
// the orphans of commands are reaped; the computer on by default.
func TestDockerfileComputer(t *testing.T) {
	plain, computer := parseDockerfile(t, "Dockerfile"), parseDockerfile(t, "Dockerfile.computer")
	if len(computer) != 3 {
		t.Fatalf("%d stages (want the ARGs, build, final)", len(computer))
	}
	// The build stages may not drift apart.
	if !slices.Equal(plain[1], computer[1]) {
		t.Errorf("the build stages differ:\nDockerfile          %v\nDockerfile.computer %v", plain[1], computer[1])
	}
	final := computer[2]
	if !regexp.MustCompile(`^debian:\S*-slim$`).MatchString(final[0].args) {
		t.Errorf("final stage FROM %s, want debian:…-slim", final[0].args)
	}
	last, env, runs := finalStage(final)
	install := strings.Join(runs, " ")
	for _, pkg := range []string{"bubblewrap", "socat", "tini", "ca-certificates", "coreutils", "bash"} {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(pkg) + `\b`).MatchString(install) {
			t.Errorf("the image does not install %s", pkg)
		}
	}
	if !strings.Contains(install, "--no-install-recommends") || !strings.Contains(install, "rm -rf /var/lib/apt/lists/*") {
		t.Errorf("apt-get without --no-install-recommends or leaving its lists: %s", install)
	}
	user := last["USER"]
	uid, gid, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q, want a numeric non-root user", user)
	}
	if g, err := strconv.Atoi(gid); err != nil || g == 0 {
		t.Errorf("USER %q, want a numeric non-root group", user)
	}
	if !strings.Contains(install, "--uid "+uid) || !strings.Contains(install, "install -d -o "+uid+" -g "+gid+" -m 0700 "+homesVolume) {
		t.Errorf("the image does not make user %s and the homes' volume %s (0700, theirs): %s", uid, homesVolume, install)
	}
	if last["VOLUME"] != `["`+homesVolume+`"]` {
		t.Errorf("VOLUME %s, want %s", last["VOLUME"], homesVolume)
	}
	if env["WORKER_COMPUTER_ROOT"] != homesRoot {
		t.Errorf("WORKER_COMPUTER_ROOT %q, want %s on the volume", env["WORKER_COMPUTER_ROOT"], homesRoot)
	}
	if last["ENTRYPOINT"] != `["/usr/local/bin/cgroup-init", "/usr/bin/tini", "--", "/usr/local/bin/toolruntime-worker"]` {
		t.Errorf("ENTRYPOINT %s, want cgroup-init, then tini, then the worker", last["ENTRYPOINT"])
	}
	if !slices.ContainsFunc(final, func(l dockerfileLine) bool {
		return l.cmd == "COPY" && l.args == "--chmod=0755 deployments/cgroup-init.sh /usr/local/bin/cgroup-init"
	}) {
		t.Error("the image does not copy cgroup-init")
	}
	if last["COPY"] != "--from=build /out/toolruntime-worker /usr/local/bin/toolruntime-worker" || last["EXPOSE"] != "9090" {
		t.Errorf("COPY %s, EXPOSE %s", last["COPY"], last["EXPOSE"])
	}
	flags := workerFlags(t)
	for k := range env {
		checkEnv(t, "Dockerfile.computer ENV", k, flags)
	}
	ignore := string(readFile(t, "Dockerfile.computer.dockerignore"))
	for _, needed := range []string{"go.mod", "go.sum", "cmd", "internal"} {
		if regexp.MustCompile(`(?m)^` + needed + `\b`).MatchString(ignore) {
			t.Errorf("Dockerfile.computer.dockerignore leaves out %s", needed)
		}
	}
	if !strings.Contains(ignore, "\n!deployments/cgroup-init.sh") {
		t.Error("Dockerfile.computer.dockerignore leaves out deployments/cgroup-init.sh")
	}
}

// TestComposeComputer checks the Compose override: the worker service of
// compose.yaml gets the computer image, the homes on a named volume at the
// image's volume, and the security options bubblewrap needs without
// privileges or capabilities.
func TestComposeComputer(t *testing.T) {
	flags := workerFlags(t)
	base := yamlDocs(t, "compose.yaml")[0]
	doc := yamlDocs(t, "compose.computer.yaml")[0]
	services, _ := doc["services"].(map[string]any)
	if len(services) != 1 || services["worker"] == nil || get(base, "services", "worker") == nil {
		t.Fatalf("the override's services %v, want the base's worker only", services)
	}
	w := services["worker"]
	if got := str(get(w, "build", "dockerfile")); got != "deployments/Dockerfile.computer" {
		t.Errorf("build dockerfile %q", got)
	}
	if !strings.Contains(str(get(w, "image")), "toolruntime-worker-computer") {
		t.Errorf("image %v", get(w, "image"))
	}
	env, _ := get(w, "environment").(map[string]any)
	for name := range env {
		checkEnv(t, "compose.computer worker", name, flags)
	}
	if str(env["WORKER_COMPUTER_ROOT"]) != homesRoot {
		t.Errorf("WORKER_COMPUTER_ROOT %v, want %s", env["WORKER_COMPUTER_ROOT"], homesRoot)
	}
	mounts := strs(get(w, "volumes"))
	if !slices.Contains(mounts, "homes:"+homesVolume) {
		t.Errorf("volumes %v, want the named volume homes at %s", mounts, homesVolume)
	}
	if top, _ := doc["volumes"].(map[string]any); top == nil {
		t.Errorf("no top-level volumes: %v", doc["volumes"])
	} else if _, ok := top["homes"]; !ok {
		t.Errorf("no top-level volume homes: %v", top)
	}
	opts := strs(get(w, "security_opt"))
	for _, want := range []string{"no-new-privileges:true", "seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} {
		if !slices.Contains(opts, want) {
			t.Errorf("security_opt %v lacks %s", opts, want)
		}
	}
	// The cgroup delegation: a private cgroup namespace, root and the
	// capabilities of cgroup-init, which drops them all before tini.
	if str(get(w, "cgroup")) != "private" || str(get(w, "user")) != "0:0" {
		t.Errorf("cgroup %v, user %v: want private and 0:0 for cgroup-init", get(w, "cgroup"), get(w, "user"))
	}
	if caps := strs(get(w, "cap_add")); !slices.Equal(caps, []string{"SYS_ADMIN", "CHOWN", "SETUID", "SETGID", "SETPCAP"}) {
		t.Errorf("cap_add %v, want exactly what cgroup-init needs", caps)
	}
	// What must not come back through the override.
	for _, key := range []string{"privileged", "cap_drop", "read_only", "pid", "userns_mode"} {
		if get(w, key) != nil {
			t.Errorf("the override sets %s: %v", key, get(w, key))
		}
	}
	if str(get(base, "services", "worker", "user")) != "65532:65532" || !slices.Contains(strs(get(base, "services", "worker", "cap_drop")), "ALL") {
		t.Error("the base worker is no longer non-root with every capability dropped")
	}
}

// TestKubernetesComputer checks the overlay: it applies the base and a
// ReadWriteMany claim, and patches the base's Deployment and container
// (by their names) with the computer image, the homes' volume, and the
// security context bubblewrap needs: a pod user namespace, seccomp and
// AppArmor that allow its calls, an unmasked /proc; never privileged,
// never a capability, never privilege escalation.
func TestKubernetesComputer(t *testing.T) {
	flags := workerFlags(t)
	kust := yamlDocs(t, "k8s/computer/kustomization.yaml")[0]
	if res := strs(kust["resources"]); !slices.Contains(res, "../") || !slices.Contains(res, "pvc.yaml") {
		t.Errorf("resources %v, want ../ and pvc.yaml", res)
	}
	patches, _ := kust["patches"].([]any)
	if len(patches) != 1 || str(get(patches[0], "path")) != "deployment-patch.yaml" {
		t.Fatalf("patches %v", patches)
	}
	var baseDep map[string]any
	for _, doc := range yamlDocs(t, "k8s/deployment.yaml") {
		if doc["kind"] == "Deployment" {
			baseDep = doc
		}
	}
	patch := yamlDocs(t, "k8s/computer/deployment-patch.yaml")[0]
	if patch["kind"] != "Deployment" || str(get(patch, "metadata", "name")) != str(get(baseDep, "metadata", "name")) {
		t.Fatalf("the patch is %v %v, want the base Deployment %v", patch["kind"], get(patch, "metadata", "name"), get(baseDep, "metadata", "name"))
	}
	pod := get(patch, "spec", "template", "spec")
	c := get(pod, "containers", 0)
	if str(get(c, "name")) != str(get(baseDep, "spec", "template", "spec", "containers", 0, "name")) {
		t.Errorf("the patch's container %v is not the base's", get(c, "name"))
	}
	if !strings.HasPrefix(str(get(c, "image")), "toolruntime-worker-computer:") {
		t.Errorf("image %v", get(c, "image"))
	}
	env, _ := get(c, "env").([]any)
	root := ""
	for _, e := range env {
		checkEnv(t, "computer patch env", str(get(e, "name")), flags)
		if str(get(e, "name")) == "WORKER_COMPUTER_ROOT" {
			root = str(get(e, "value"))
		}
	}
	if root != homesRoot {
		t.Errorf("WORKER_COMPUTER_ROOT %q, want %s", root, homesRoot)
	}
	if str(get(c, "volumeMounts", 0, "mountPath")) != homesVolume || str(get(c, "volumeMounts", 0, "name")) != str(get(pod, "volumes", 0, "name")) {
		t.Errorf("volumeMounts %v, volumes %v", get(c, "volumeMounts"), get(pod, "volumes"))
	}
	pvc := yamlDocs(t, "k8s/computer/pvc.yaml")[0]
	if pvc["kind"] != "PersistentVolumeClaim" || str(get(pod, "volumes", 0, "persistentVolumeClaim", "claimName")) != str(get(pvc, "metadata", "name")) {
		t.Errorf("the volume %v does not claim the PVC %v", get(pod, "volumes", 0), get(pvc, "metadata", "name"))
	}
	if !slices.Contains(strs(get(pvc, "spec", "accessModes")), "ReadWriteMany") {
		t.Errorf("PVC access modes %v: every worker mounts the homes", get(pvc, "spec", "accessModes"))
	}
	for _, check := range []struct {
		path []any
		want string
	}{
		{[]any{"hostUsers"}, "false"},
		{[]any{"securityContext", "seccompProfile", "type"}, "Unconfined"},
		{[]any{"securityContext", "appArmorProfile", "type"}, "Unconfined"},
		{[]any{"containers", 0, "securityContext", "procMount"}, "Unmasked"},
	} {
		if got := str(get(pod, check.path...)); got != check.want {
			t.Errorf("pod %v is %q, want %s", check.path, got, check.want)
		}
	}
	// Nothing that grants privileges, and nothing that undoes the base's
	// non-root, no-escalation, no-capability settings.
	sc, _ := get(c, "securityContext").(map[string]any)
	for _, key := range []string{"privileged", "readOnlyRootFilesystem"} {
		if _, ok := sc[key]; ok {
			t.Errorf("the patch's container securityContext sets %s", key)
		}
	}
	// cgroup-init starts as root of the pod's user namespace with the
	// capabilities it needs (and drops them, and root, before tini);
	// only a pod user namespace makes that acceptable.
	if str(get(pod, "hostUsers")) != "false" || str(sc["runAsUser"]) != "0" || str(sc["runAsNonRoot"]) != "false" {
		t.Errorf("securityContext %v: want root of the pod's user namespace for cgroup-init", sc)
	}
	if caps := strs(get(sc, "capabilities", "add")); !slices.Equal(caps, []string{"SYS_ADMIN", "CHOWN", "SETUID", "SETGID", "SETPCAP"}) || get(sc, "capabilities", "drop") != nil {
		t.Errorf("capabilities %v, want exactly what cgroup-init needs added to the base's drop ALL", get(sc, "capabilities"))
	}
	podSC, _ := get(pod, "securityContext").(map[string]any)
	for _, key := range []string{"runAsUser", "runAsNonRoot", "runAsGroup"} {
		if _, ok := podSC[key]; ok {
			t.Errorf("the patch's pod securityContext sets %s", key)
		}
	}
	for _, key := range []string{"hostPID", "hostNetwork", "hostIPC", "automountServiceAccountToken"} {
		if get(pod, key) != nil {
			t.Errorf("the patch sets %s", key)
		}
	}
}

// TestCgroupInitFallsBack runs the image's entrypoint where there is no
// cgroup v2 to delegate (a plain directory stands for /sys/fs/cgroup):
// it says so in one line, and as root still drops to the worker's user
// and every capability before it execs its arguments.
func TestCgroupInitFallsBack(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("SKIPPING: no setpriv (util-linux: scripts/test-deps.sh installs it)")
	}
	cmd := exec.Command("/bin/sh", "cgroup-init.sh", "/bin/sh", "-c", `echo "uid=$(id -u)"; grep CapEff /proc/self/status`)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "CGROUP_INIT_ROOT=" + t.TempDir(), "WORKER_UID=65534"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "uid=65534"
	if os.Geteuid() != 0 {
		want = "uid=" + strconv.Itoa(os.Geteuid())
	}
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "CapEff:\t0000000000000000") {
		t.Errorf("output %q, want %s and no capabilities", out, want)
	}
	if os.Geteuid() == 0 && (strings.Count(string(out), "cgroup-init:") != 1 || !strings.Contains(string(out), "is not cgroup v2")) {
		t.Errorf("output %q, want the fallback and its reason in one line", out)
	}
}
