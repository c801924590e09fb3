package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// A slowloris client, its headers a byte at a time, has its connection
// closed at the server's header deadline, while the door answers others.
func TestSlowHeaders(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--nats-url", s.ClientURL(), "--listen", "127.0.0.1:0", "--dev-principal", "dev"}, getenv, &stderr,
			func(addr string) { addrc <- addr })
	}()
	defer func() { cancel(); <-done }()
	var addr string
	select {
	case addr = <-addrc:
	case code := <-done:
		t.Fatalf("mcp-server exited %d: %s", code, stderr.String())
	}

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
	closed := make(chan time.Duration, 1)
	began := time.Now()
	go func() {
		for {
			if _, err := conn.Write([]byte("a")); err != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
			if time.Since(began) > time.Minute {
				break
			}
		}
		closed <- time.Since(began)
	}()
	go func() {
		// The server answers 408 or closes: either way the read ends.
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
	}()

	// Meanwhile the door serves.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ping beside a slowloris client: %d", resp.StatusCode)
	}
	if d := <-closed; d > 20*time.Second {
		t.Errorf("the slow client held its connection %s", d)
	} else {
		t.Logf("the slow client's connection ended after %s", d.Round(100*time.Millisecond))
	}
}
