// Package natstest provides real NATS servers for tests: an embedded
// server with JetStream on a free port and a temporary store, restartable
// on the same store, and connections that are closed with the test.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is an embedded NATS server with JetStream for one test.
type Server struct {
	*server.Server
	t    testing.TB
	opts server.Options
}

// Start starts a server on a free port with a fresh store directory. It
// is shut down when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, func(*server.Options) {})
}

// StartWith is Start with the server's options changed by configure
// first (a small max payload, say).
func StartWith(t testing.TB, configure func(*server.Options)) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		ServerName: "natstest",
	}}
	configure(&s.opts)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	ns, err := server.NewServer(&s.opts)
	if err != nil {
		s.t.Fatalf("nats server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		s.t.Fatal("nats server did not become ready")
	}
	s.Server = ns
	// Keep the port across restarts so clients reconnect to it.
	s.opts.Port = ns.Addr().(*net.TCPAddr).Port
}

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	if s.Server != nil && s.Server.Running() {
		s.Server.Shutdown()
		s.Server.WaitForShutdown()
	}
}

// Restart stops the server and starts it again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Connect returns a client connection that reconnects forever and is
// closed when the test ends.
func (s *Server) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// OnePullWaiting remakes the durable consumer stream > durable as it is
// but for MaxWaiting 1: the server then keeps one pull request at most
// and drops a second sent while the first still waits, without a word
// (a request with a heartbeat gets no 409). A nats.go pull that counted
// on the dropped request is left with messages stored and none asked
// for, the state package repull recovers from: tests of it make that
// state with this every time.
func OnePullWaiting(t testing.TB, js jetstream.JetStream, stream, durable string) jetstream.Consumer {
	t.Helper()
	ctx := t.Context()
	c, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	cfg.MaxWaiting = 1
	if err := js.DeleteConsumer(ctx, stream, durable); err != nil {
		t.Fatal(err)
	}
	if c, err = js.CreateConsumer(ctx, stream, cfg); err != nil {
		t.Fatal(err)
	}
	return c
}
