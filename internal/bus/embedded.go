package bus

import (
	"fmt"
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

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections.
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
