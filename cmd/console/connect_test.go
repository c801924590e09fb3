package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// With --mcp-config and the workers' token keys, the console serves the
// connect page listing the oauth servers, with the redirect on
// --public-url; without the keys it refuses to start.
func TestConsoleConnectFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"servers": {"github": {"url": "https://mcp.example.com/mcp", "oauth": {"client_id": "c"}},
		"files": {"url": "https://files.example.com/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("k1:"+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	env := func(string) string { return "" }

	var out, errb syncBuf
	if code := run(context.Background(), []string{"--nats-url", srv.ClientURL(), "--mcp-config", cfg}, env, &out, &errb); code != 2 || !strings.Contains(errb.String(), "token keys") {
		t.Fatalf("without keys: exit %d, %s", code, errb.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr syncBuf
	rc := make(chan int, 1)
	go func() {
		rc <- run(ctx, []string{"--nats-url", srv.ClientURL(), "--listen", "127.0.0.1:0", "--mcp-config", cfg, "--mcp-token-keys", keys,
			"--public-url", "https://console.example/"}, env, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v; stderr: %s", err, stderr.String())
	}
	go io.Copy(io.Discard, pr)
	u, _ := strings.CutPrefix(strings.TrimSpace(line), "Console at ")
	base := u[:strings.Index(u, "/login")]
	token := u[strings.Index(u, "token=")+len("token="):]
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/login", url.Values{"token": {token}, "name": {"Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(base + "/connect?key=fair:tenant-42")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != 200 || !strings.Contains(page, `<td><span class="vis">github</span></td>`) || strings.Contains(page, `<span class="vis">files</span>`) || !strings.Contains(page, "not connected") {
		t.Fatalf("GET /connect: %s: %s", resp.Status, page)
	}
	if !strings.Contains(stderr.String(), "redirect=https://console.example/connect/callback") {
		t.Errorf("the start log does not name the redirect: %s", stderr.String())
	}
	cancel()
	select {
	case code := <-rc:
		if code != 0 {
			t.Errorf("exit %d; stderr: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the console did not stop")
	}
}
