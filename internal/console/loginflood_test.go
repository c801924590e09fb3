package console_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/internal/natstest"
)

// lockedBuffer is a log's destination that tests read while it is
// written.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Anyone who reaches the port can post wrong login tokens. 300 of them
// write at most a few lines of the console's log (one a second, with the
// count), not one line each, and the count adds up to all of them.
func TestWrongTokensDoNotFloodTheLog(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var logged lockedBuffer
	c, err := console.New(console.Config{NC: srv.Connect(t), Token: testToken, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)
	const posts = 300
	for i := range posts {
		resp, err := http.PostForm(hs.URL+"/login", url.Values{"token": {"wrong" + strings.Repeat("x", i%7)}, "name": {"m"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d", resp.StatusCode)
		}
	}
	lines := strings.Count(logged.String(), "wrong token")
	t.Logf("%d wrong tokens wrote %d log lines", posts, lines)
	if lines == 0 || lines > posts/10 {
		t.Errorf("%d wrong tokens wrote %d log lines", posts, lines)
	}
}
