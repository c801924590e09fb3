package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/natstest"
)

// The test binary doubles as the Go MCP server of the stdio tests: run
// with serverEnv set, it serves the test server on stdin/stdout.
const (
	serverEnv = "MCP_TEST_SERVER"
	marksEnv  = "MCP_TEST_MARKS"
	// holdEnv names a file: the server marks "waiting" and reads nothing
	// (initialize included) until the file exists, as a server whose
	// start takes long (an npx fetching it) would.
	holdEnv = "MCP_TEST_HOLD"
)

func TestMain(m *testing.M) {
	if mode, ok := strings.CutPrefix(os.Getenv(serverEnv), "hostile-"); ok {
		os.Exit(hostileServer(mode))
	}
	if os.Getenv(serverEnv) == "cgroup" {
		if err := newHostileCgroupServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(serverEnv) == "stdio" {
		if hold := os.Getenv(holdEnv); hold != "" {
			markLine(os.Getenv(marksEnv), "waiting")
			for {
				if _, err := os.Stat(hold); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		srv := newTestServer(os.Getenv(marksEnv))
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	natstest.WaitingParallel() // its parallel tests wait on MCP servers and NATS round trips
	os.Exit(m.Run())
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text"`
}

type sumIn struct {
	A int `json:"a" jsonschema:"the first number"`
	B int `json:"b" jsonschema:"the second number"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

type slowIn struct {
	MS  int    `json:"ms" jsonschema:"how long to work, in milliseconds"`
	Tag string `json:"tag" jsonschema:"a label recorded in the marks file"`
}

type empty struct{}

func yes() *bool { return new(true) }
func no() *bool  { return new(false) }

var readOnly = &sdk.ToolAnnotations{ReadOnlyHint: true}

// newTestServer is the Go MCP server the tests talk to, over streamable
// HTTP in process and over stdio as a child process. marks is a
// directory where tools record what happened to them (calls, cancels).
func newTestServer(marks string) *sdk.Server {
	mark := func(line string) { markLine(marks, line) }
	srv := sdk.NewServer(&sdk.Implementation{Name: "gotest", Title: "Go test server", Version: "1.0.0"}, &sdk.ServerOptions{
		Instructions: "A small server for tests: echo text, add numbers, wait, fail, draw and take notes.",
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echo the text back.", Annotations: readOnly},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "add", Description: "Add two whole numbers.", Annotations: readOnly},
		func(_ context.Context, _ *sdk.CallToolRequest, in sumIn) (*sdk.CallToolResult, sumOut, error) {
			return nil, sumOut{Sum: in.A + in.B}, nil
		})
	slow := func(ctx context.Context, _ *sdk.CallToolRequest, in slowIn) (*sdk.CallToolResult, any, error) {
		mark("start " + in.Tag)
		select {
		case <-time.After(time.Duration(in.MS) * time.Millisecond):
			mark("done " + in.Tag)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "worked " + in.Tag}}}, nil, nil
		case <-ctx.Done():
			mark("cancelled " + in.Tag)
			return nil, nil, ctx.Err()
		}
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "slow", Description: "Work for a while, then answer; stops when cancelled.", Annotations: readOnly}, slow)
	sdk.AddTool(srv, &sdk.Tool{Name: "slow_write", Description: "Write for a while, then answer; stops when cancelled.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: no()}}, slow)
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "Always fails.", Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it failed on purpose"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "draw", Description: "Draw a picture and caption it.", Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a picture:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: drawing()},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "note://1", MIMEType: "text/plain", Text: "the caption"}},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///srv/picture.pdf", MIMEType: "application/pdf", Blob: drawingPDF}},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF\x00\x00\x00\x00WAVEfmt ")},
			}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "write_note", Description: "Write a note, replacing the last one.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: yes()}},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			mark("note " + in.Text)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "noted"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "append_note", Description: "Append to the notes.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: no()}},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			mark("append " + in.Text)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "appended"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "pid", Description: "The server's process id.", Annotations: readOnly},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil, nil
		})
	// Tools the worker must leave out, each with a note: a name outside
	// the provider's alphabet and a schema that does not compile.
	raw := func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{}, nil
	}
	srv.AddTool(&sdk.Tool{Name: "notes.read", Description: "A dotted name.", InputSchema: json.RawMessage(`{"type":"object"}`)}, raw)
	srv.AddTool(&sdk.Tool{Name: "broken", Description: "A schema that does not compile.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"strnig"}}}`)}, raw)
	// grow adds a tool at run time, which sends tools/list_changed.
	sdk.AddTool(srv, &sdk.Tool{Name: "grow", Description: "Add the tool extra to this server."},
		func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(srv, &sdk.Tool{Name: "extra", Description: "Added at run time.", Annotations: readOnly},
				func(context.Context, *sdk.CallToolRequest, empty) (*sdk.CallToolResult, any, error) {
					return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "extra"}}}, nil, nil
				})
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grown"}}}, nil, nil
		})
	return srv
}

// markLine appends line to the marks file of directory marks (none when
// marks is empty).
func markLine(marks, line string) {
	if marks == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(marks, "marks.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, line)
		_ = f.Close()
	}
}

// httpServer serves a fresh test server over streamable HTTP. kill drops
// every session and connection, as a server restart would.
type httpServer struct {
	*httptest.Server
	handler atomic.Pointer[http.Handler]
	marks   string
}

func startHTTPServer(t *testing.T) *httpServer {
	t.Helper()
	hs := &httpServer{marks: t.TempDir()}
	hs.reset()
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*hs.handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func (hs *httpServer) reset() {
	srv := newTestServer(hs.marks)
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs.handler.Store(&h)
}

// kill forgets every session and cuts every connection.
func (hs *httpServer) kill() {
	hs.reset()
	hs.CloseClientConnections()
}

func (hs *httpServer) config() mcp.ServerConfig {
	return mcp.ServerConfig{URL: hs.URL}
}

// stdioConfig runs this test binary as the Go server over stdio; the
// returned directory collects its marks.
func stdioConfig(t *testing.T) (mcp.ServerConfig, string) {
	t.Helper()
	marks := t.TempDir()
	return mcp.ServerConfig{
		Command: os.Args[0],
		Args:    []string{"-test.run=^$"},
		Env:     map[string]string{serverEnv: "stdio", marksEnv: marks},
	}, marks
}

// readMarks returns the marks a server recorded.
func readMarks(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "marks.log"))
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

// waitMark waits until the server recorded line.
func waitMark(t *testing.T, dir, line string) {
	t.Helper()
	want := strings.ReplaceAll(line, " ", "_")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range readMarks(dir) {
			if m == want {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the server never recorded %q; it recorded %q", line, readMarks(dir))
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("MCP_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newManager starts a manager for servers, closed when the test ends.
func newManager(t *testing.T, servers map[string]mcp.ServerConfig) *mcp.Manager {
	t.Helper()
	m, err := mcp.NewManager(mcp.Config{Servers: servers}, mcp.Options{
		Logger: testLogger(t), MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// npmDir is where scripts/test-deps.sh installs the reference servers
// from npm: MCP_NPM_DIR, else ~/.cache/toolruntime/mcp-npm (under the
// user's cache directory). Without them, or without node to run them,
// the test skips saying what it needs; a directory MCP_NPM_DIR names must
// hold them (CI names one, so that a failed install fails there).
func npmDir(t *testing.T) string {
	t.Helper()
	dir, named := os.Getenv("MCP_NPM_DIR"), true
	if dir == "" {
		named = false
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("needs the MCP reference servers from npm, which scripts/test-deps.sh installs, and MCP_NPM_DIR "+
				"naming their directory: no user cache directory to look in by default (%v)", err)
		}
		dir = filepath.Join(cache, "toolruntime", "mcp-npm")
	}
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js 20 or later)")
	}
	for _, name := range []string{"mcp-server-everything", "mcp-server-filesystem"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", name)); err != nil {
			missing = append(missing, "the MCP reference servers from npm (@modelcontextprotocol/server-everything and "+
				"server-filesystem 2026.8.31) in "+dir)
			break
		}
	}
	if len(missing) > 0 {
		msg := "needs " + strings.Join(missing, " and ") + ": scripts/test-deps.sh installs them (into MCP_NPM_DIR when it is set)"
		if named {
			t.Fatal("MCP_NPM_DIR is set: " + msg)
		}
		t.Skip(msg)
	}
	return dir
}

func npmBin(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(npmDir(t), "node_modules", ".bin", name)
}

// drawing is the picture the test server's draw tool returns: a real
// 64×48 PNG, so that it reaches the model as an input_image.
func drawing() []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	for y := range 48 {
		for x := range 64 {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 4), uint8(y * 5), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// drawingPDF is the PDF the draw tool embeds as a blob resource.
var drawingPDF = []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")
