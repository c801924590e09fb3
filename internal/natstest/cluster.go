package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Account is the account clients of a cluster without accounts use; the
// server's stream and consumer lookups take it by name.
const Account = server.DEFAULT_GLOBAL_ACCOUNT

// Cluster is a JetStream cluster of embedded servers in this process,
// with routes between every pair. Each node keeps its ports and its store
// across restarts, so a restarted node rejoins as the same server and
// clients reconnect to it.
type Cluster struct {
	Name  string
	Nodes []*Node
}

// Node is one server of a cluster.
type Node struct {
	Name string
	// opts is the template every start copies: the server edits the
	// options it is given.
	opts server.Options
	mu   sync.Mutex
	srv  *server.Server
}

// StartCluster starts n servers (n1 … nn) with JetStream, routes and
// stores under the test's temporary directory, and waits until they have
// elected a JetStream meta leader. The cluster is shut down when the test
// ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := NewCluster(n, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// NewCluster starts n servers with their stores under dir and waits until
// the cluster has a JetStream meta leader that every node follows. The
// ports are chosen free up front, since routes must name them.
func NewCluster(n int, dir string) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("a cluster needs at least one node, not %d", n)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: "natstest"}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[2*i+1])
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		store := filepath.Join(dir, name)
		if err := os.MkdirAll(store, 0o755); err != nil {
			return nil, err
		}
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		c.Nodes = append(c.Nodes, &Node{Name: name, opts: server.Options{
			ServerName: name, Host: "127.0.0.1", Port: ports[2*i],
			JetStream: true, StoreDir: store, NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: ports[2*i+1]},
			Routes:  server.RoutesFromStr(strings.Join(others, ",")),
		}})
	}
	// Start them all before waiting: the first cannot be ready for
	// JetStream until it has peers to elect a meta leader with.
	for _, node := range c.Nodes {
		if err := node.launch(); err != nil {
			c.Shutdown()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// freePorts finds n distinct free TCP ports by listening on port 0. All
// listeners are held until every port is known, so none repeats.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// URLs are the client URLs of every node, running or not.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.ClientURL()
	}
	return urls
}

// URL is URLs joined with commas, as nats.Connect and --nats-url take it:
// a client given it fails over to any node.
func (c *Cluster) URL() string { return strings.Join(c.URLs(), ",") }

// Connect returns a client connection to any node that reconnects forever
// (to any node) and is closed when the test ends.
func (c *Cluster) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := c.Dial()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Dial connects to any node, with reconnects forever.
func (c *Cluster) Dial(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	return nats.Connect(c.URL(), opts...)
}

// JetStream returns a JetStream context on a new connection.
func (c *Cluster) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Shutdown stops every node.
func (c *Cluster) Shutdown() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// Node returns the node named name (n1 …), or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// MetaLeader returns the running node that leads the JetStream meta
// group, or nil while there is none.
func (c *Cluster) MetaLeader() *Node {
	for _, n := range c.Nodes {
		if s := n.Server(); s != nil && s.JetStreamIsLeader() {
			return n
		}
	}
	return nil
}

// StreamLeader returns the running node that leads stream (of the
// default account), or nil while there is none.
func (c *Cluster) StreamLeader(stream string) *Node {
	for _, n := range c.Nodes {
		if s := n.Server(); s != nil && s.JetStreamIsStreamLeader(Account, stream) {
			return n
		}
	}
	return nil
}

// WaitReady waits until a JetStream meta leader is elected, every
// running node is current with it, and the leader has heard from every
// running node: until it has, it places no stream on that node, and an
// R3 stream created then fails with "no suitable peers for placement,
// peer offline" (TestScheduleInCluster did, one run in a few).
func (c *Cluster) WaitReady(ctx context.Context) error {
	return poll(ctx, func() error {
		leader := c.MetaLeader()
		if leader == nil {
			return errors.New("no JetStream meta leader")
		}
		running := 0
		for _, n := range c.Nodes {
			s := n.Server()
			if s == nil {
				continue
			}
			running++
			if !s.JetStreamIsCurrent() {
				return fmt.Errorf("%s is not current with the meta leader", n.Name)
			}
		}
		if s := leader.Server(); s != nil {
			if peers := s.JetStreamClusterPeers(); len(peers) < running {
				return fmt.Errorf("the meta leader %s knows %d of the %d running nodes online (%v)", leader.Name, len(peers), running, peers)
			}
		}
		return nil
	})
}

// WaitHealthy waits until every running node reports healthy the way the
// server's /healthz does (ready for connections, current with the meta
// leader, its streams and consumers recovered), every stream has a
// leader, and every leader sees each running replica current. It is what
// to wait for before taking the next node down in a rolling restart:
// /healthz alone can pass while a restarted replica is still catching up.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return poll(ctx, func() error {
		if c.MetaLeader() == nil {
			return errors.New("no JetStream meta leader")
		}
		for _, n := range c.Nodes {
			if err := n.Healthy(); err != nil {
				return err
			}
		}
		return c.lagging()
	})
}

// lagging names a stream without a leader, or a stream or consumer whose
// leader sees a running replica that is not current.
func (c *Cluster) lagging() error {
	running := map[string]bool{}
	for _, n := range c.Nodes {
		running[n.Name] = n.Running()
	}
	behind := func(what, leader string, ci *server.ClusterInfo) error {
		for _, r := range ci.Replicas {
			if running[r.Name] && (!r.Current || r.Offline) {
				return fmt.Errorf("%s: replica %s is not current with leader %s (lag %d)", what, r.Name, leader, r.Lag)
			}
		}
		return nil
	}
	for _, n := range c.Nodes {
		s := n.Server()
		if s == nil {
			continue
		}
		jsz, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
		if err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		for _, acc := range jsz.AccountDetails {
			for _, sd := range acc.Streams {
				if sd.Cluster == nil {
					continue
				}
				if sd.Cluster.Leader == "" {
					return fmt.Errorf("stream %s has no leader (as %s sees it)", sd.Name, n.Name)
				}
				if sd.Cluster.Leader == n.Name {
					if err := behind("stream "+sd.Name, n.Name, sd.Cluster); err != nil {
						return err
					}
				}
				for _, ci := range sd.Consumer {
					if ci != nil && ci.Cluster != nil && ci.Cluster.Leader == n.Name {
						if err := behind("consumer "+sd.Name+" > "+ci.Name, n.Name, ci.Cluster); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

func poll(ctx context.Context, check func() error) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Server is the node's running server, or nil while it is stopped.
func (n *Node) Server() *server.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// Running reports whether the node is up.
func (n *Node) Running() bool { return n.Server() != nil }

// ClientURL is the node's client URL; it stays the same across restarts.
func (n *Node) ClientURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port) }

// StoreDir is the node's JetStream store.
func (n *Node) StoreDir() string { return n.opts.StoreDir }

// Healthy is nil when the node is stopped or healthy (see
// Cluster.WaitHealthy), else what is wrong.
func (n *Node) Healthy() error {
	s := n.Server()
	if s == nil {
		return nil
	}
	hs := s.Healthz(nil)
	if hs.Error != "" || len(hs.Errors) > 0 || hs.StatusCode >= 300 {
		return fmt.Errorf("%s is not healthy: %s %v", n.Name, hs.Error, hs.Errors)
	}
	return nil
}

// Stop shuts the node down and waits for it. Stopping a stopped node does
// nothing.
func (n *Node) Stop() {
	n.mu.Lock()
	s := n.srv
	n.srv = nil
	n.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Start starts a stopped node on its ports and store and waits until it
// accepts connections (not until it has caught up: see WaitHealthy).
// Starting a running node does nothing.
func (n *Node) Start() error {
	if n.Running() {
		return nil
	}
	// A port can stay busy for a moment after the old server let it go.
	var err error
	for range 10 {
		if err = n.launch(); err == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return err
}

// Restart stops the node and starts it again on the same ports and store.
func (n *Node) Restart() error {
	n.Stop()
	return n.Start()
}

func (n *Node) launch() error {
	opts := n.opts
	opts.Routes = append(opts.Routes[:0:0], n.opts.Routes...)
	s, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("nats server %s: %w", n.Name, err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return fmt.Errorf("nats server %s did not become ready for connections", n.Name)
	}
	n.mu.Lock()
	n.srv = s
	n.mu.Unlock()
	return nil
}
