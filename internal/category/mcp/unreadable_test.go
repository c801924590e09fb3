package mcp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/tool"
)

// corrupting serves the test server with every tools/call result's
// base64 data spoiled ("data":"!…), as a broken server would send it,
// and counts the sessions opened.
type corrupting struct {
	next  http.Handler
	inits atomic.Int32
}

func (c *corrupting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte(`"method":"initialize"`)) {
		c.inits.Add(1)
	}
	if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
		w = &spoiler{ResponseWriter: w}
	}
	c.next.ServeHTTP(w, r)
}

type spoiler struct{ http.ResponseWriter }

func (s *spoiler) Write(p []byte) (int, error) {
	_, err := s.ResponseWriter.Write(bytes.ReplaceAll(p, []byte(`"data":"`), []byte(`"data":"!`)))
	return len(p), err
}

func (s *spoiler) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestUnreadableResult: a server whose result does not decode (an image
// whose data is not base64) answered the call; its connection is not
// lost. The call is a tool_error that says the call ran and its output
// could not be read, nothing is retried, and the session is kept (a
// reconnect would lose the server's state for one bad image).
func TestUnreadableResult(t *testing.T) {
	t.Parallel()
	hs := startHTTPServer(t)
	c := &corrupting{next: *hs.handler.Load()}
	var h http.Handler = c
	hs.handler.Store(&h)
	m := newManager(t, map[string]mcp.ServerConfig{"go": hs.config()})
	set := assemble(t, m, textContext("go"))
	for range 2 {
		o := dispatch(context.Background(), set, "go", "draw", ``)
		if want := "The MCP server go ran draw, but its result could not be read"; kind(o) != tool.ToolError || !strings.Contains(output(t, o), want) {
			t.Errorf("draw = %s %q; want a tool_error containing %q", kind(o), output(t, o), want)
		}
	}
	if o := dispatch(context.Background(), set, "go", "echo", `{"text":"still here"}`); output(t, o) != "still here" {
		t.Errorf("echo after = %q", output(t, o))
	}
	if n := c.inits.Load(); n != 1 {
		t.Errorf("%d sessions opened, want 1", n)
	}
}
