package bus

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures an in-process NATS server with JetStream.
type EmbeddedOptions struct {
	Host     string // default 127.0.0.1
	Port     int    // default 4222; -1 picks a free port
	HTTPPort int    // monitoring; default 8222, -1 picks a free port, 0 keeps the default
	StoreDir string // JetStream storage directory
	// NoMonitoring turns the monitoring port off.
	NoMonitoring bool
}

// PortInUseError is a port of the embedded server that something else
// listens on. Port is "client" or "monitoring".
type PortInUseError struct {
	Port string
	Addr string
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("the embedded NATS server's %s port %s is in use by another program", e.Port, e.Addr)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections. Its ports are tried first: a port
// in use is a *PortInUseError at once, where the server would only fail
// to become ready.
func StartEmbedded(o EmbeddedOptions) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "turn-worker-embedded",
		Host:       o.Host,
		Port:       o.Port,
		HTTPHost:   o.Host,
		HTTPPort:   o.HTTPPort,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
	}
	if opts.Host == "" {
		opts.Host, opts.HTTPHost = "127.0.0.1", "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = 4222
	}
	if opts.HTTPPort == 0 {
		opts.HTTPPort = 8222
	}
	if o.NoMonitoring {
		opts.HTTPPort = 0
	}
	if err := portFree("client", opts.Host, opts.Port); err != nil {
		return nil, err
	}
	if opts.HTTPPort > 0 {
		if err := portFree("monitoring", opts.HTTPHost, opts.HTTPPort); err != nil {
			return nil, err
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS server did not become ready on %s:%d", opts.Host, opts.Port)
	}
	return ns, nil
}

// portFree listens on host:port and lets go: what the server would do
// first, with an error that names the port. A port of -1 (any free one)
// is not tried.
func portFree(name, host string, port int) error {
	if port < 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return &PortInUseError{Port: name, Addr: addr, Err: err}
		}
		return fmt.Errorf("embedded NATS server: %s port %s: %w", name, addr, err)
	}
	return ln.Close()
}
