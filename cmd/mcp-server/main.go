// Command mcp-server serves the fleet's tools over the Model Context
// Protocol (Streamable HTTP at /mcp), for any MCP client: it is package
// mcpdoor's door on its own NATS connection, beside the workers.
//
//	go run ./cmd/mcp-server --principals principals.json
//	go run ./cmd/mcp-server --dev-principal dev   # loopback only, no token
//
// It takes the worker's connection flags (--nats-url, --context, …).
// docs/mcp-server.md has the rest.
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/natsconn"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/mcpdoor"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stderr, nil)) }

// list is a comma-separated flag.
type list []string

func (l *list) String() string { return strings.Join(*l, ",") }
func (l *list) Set(s string) error {
	*l = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// run is the program; ready, when set, gets the address served on.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready func(addr string)) int {
	fs := flag.NewFlagSet("mcp-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn natsconn.Flags
	conn.Register(fs, "NATS server or cluster URLs (comma-separated); default "+nats.DefaultURL)
	listen := fs.String("listen", "127.0.0.1:8471", "address to serve MCP on (at /mcp)")
	principals := fs.String("principals", "", "principals file: bearer token hashes and JWT subjects mapped to agents (docs/mcp-server.md)")
	dev := fs.String("dev-principal", "", "serve every request as this principal, with no token: only on a loopback --listen, for trials")
	resource := fs.String("resource", "", "public URL of the MCP endpoint (https://host/mcp): the protected resource and the JWT audience; default from each request")
	jwtIssuer := fs.String("jwt-issuer", "", "accept JWT access tokens of this issuer (iss), their sub mapped by --principals' jwt_sub")
	jwtJWKS := fs.String("jwt-jwks", "", "the issuer's JWKS: a URL or a file")
	jwtAudience := fs.String("jwt-audience", "", "the audience JWTs must name (default --resource, else the request's URL)")
	var authServers, hosts, origins list
	fs.Var(&authServers, "authorization-servers", "authorization server URLs listed in /.well-known/oauth-protected-resource (comma-separated)")
	fs.Var(&hosts, "allowed-hosts", "Host values served besides loopback names on a loopback listener (comma-separated); on other listeners, empty allows any")
	fs.Var(&origins, "allowed-origins", "browser origins allowed besides those of the allowed hosts (comma-separated)")
	maxBody := fs.Int64("max-body-bytes", 1<<20, "largest request body")
	maxInFlight := fs.Int("max-in-flight", 64, "tools/call requests in flight per principal on this process (a principal's max_in_flight overrides it)")
	rate := fs.Float64("rate", mcpdoor.DefaultRate, "requests a second per principal of weight 1 on this process before the excess is held back (429 past 64 held), and refusals a second per remote address for want of a valid token; below zero: no pacing")
	approvalWait := fs.Duration("approval-wait", 10*time.Minute, "how long a call held for a person's approval keeps its request open")
	catalogTTL := fs.Duration("catalog-ttl", 5*time.Second, "how long a principal's tool list is reused, and the ttlMs clients are told")
	taskAfter := fs.Duration("task-after", mcpdoor.DefaultTaskAfter, "how long a call of a client that declared the tasks extension runs before it is answered with a task")
	taskTTL := fs.Duration("task-ttl", time.Hour, "how long a task id is honoured (its ttlMs)")
	var taskRequired list
	fs.Var(&taskRequired, "task-required", "tools that run only as tasks (comma-separated): a client without the tasks extension gets -32021")
	sealKeyFile := fs.String("seal-key-file", "", "file holding the key that seals approval requestStates: 64 hex digits (else MCP_SERVER_SEAL_KEY; else one drawn per process, so only this process opens its states)")
	httpAddr := fs.String("http-addr", "", "serve Prometheus /metrics, /healthz and /readyz on this address (empty: off)")
	otlpEndpoint := fs.String("otlp-endpoint", "", "send trace spans over OTLP/HTTP to this collector (host:port or URL; empty: where OTEL_EXPORTER_OTLP_ENDPOINT says, else no export)")
	otlpInsecure := fs.Bool("otlp-insecure", false, "send spans without TLS")
	logFormat := fs.String("log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcp-server: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var log *slog.Logger
	if *logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	lookup := func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}
	if err := natsconn.FromEnv(fs, set, "MCP_SERVER", lookup); err != nil {
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 2
	}
	if err := conn.Resolve(set, lookup); err != nil {
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 2
	}
	if conn.URL == "" {
		conn.URL = nats.DefaultURL
	}
	cfg := mcpdoor.Config{
		Resource: *resource, AuthorizationServers: authServers, AllowedHosts: hosts, AllowedOrigins: origins,
		MaxBodyBytes: *maxBody, MaxInFlight: *maxInFlight, Rate: *rate, ApprovalWait: *approvalWait, CatalogTTL: *catalogTTL, Logger: log,
		TaskAfter: *taskAfter, TaskTTL: *taskTTL, TaskRequired: taskRequired,
	}
	if *principals != "" {
		ps, err := mcpdoor.LoadPrincipals(*principals)
		if err != nil {
			fmt.Fprintln(stderr, "mcp-server: --principals:", err)
			return 2
		}
		cfg.Principals = ps
	}
	if *jwtIssuer != "" || *jwtJWKS != "" {
		if *jwtIssuer == "" || *jwtJWKS == "" || cfg.Principals == nil {
			fmt.Fprintln(stderr, "mcp-server: --jwt-issuer needs --jwt-jwks and --principals (whose jwt_sub entries map subjects)")
			return 2
		}
		cfg.JWT = &mcpdoor.JWTConfig{Issuer: *jwtIssuer, JWKS: *jwtJWKS, Audience: *jwtAudience}
	}
	if *dev != "" {
		if cfg.Principals != nil || cfg.JWT != nil {
			fmt.Fprintln(stderr, "mcp-server: --dev-principal goes alone, without --principals or --jwt-issuer")
			return 2
		}
		cfg.DevPrincipal = *dev
	}
	if cfg.Principals == nil && cfg.DevPrincipal == "" {
		fmt.Fprintln(stderr, "mcp-server: give --principals FILE (or, on loopback for a trial, --dev-principal NAME)")
		return 2
	}
	if *dev != "" && !loopbackListen(*listen) {
		fmt.Fprintf(stderr, "mcp-server: --dev-principal serves without a token, so only on a loopback --listen (127.0.0.1:PORT, [::1]:PORT, localhost:PORT), not %q\n", *listen)
		return 2
	}
	switch {
	case *sealKeyFile != "":
		b, err := os.ReadFile(*sealKeyFile)
		if err != nil {
			fmt.Fprintln(stderr, "mcp-server: --seal-key-file:", err)
			return 2
		}
		if cfg.SealKey, err = parseSealKey(string(b)); err != nil {
			fmt.Fprintln(stderr, "mcp-server: --seal-key-file:", err)
			return 2
		}
	case getenv("MCP_SERVER_SEAL_KEY") != "":
		var err error
		if cfg.SealKey, err = parseSealKey(getenv("MCP_SERVER_SEAL_KEY")); err != nil {
			fmt.Fprintln(stderr, "mcp-server: MCP_SERVER_SEAL_KEY:", err)
			return 2
		}
	default:
		log.Warn("no --seal-key-file: approval requestStates open on this process only; give every replica the same key")
	}
	auth, err := conn.Options()
	if err != nil {
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 2
	}
	opts := append([]nats.Option{nats.Name("toolruntime-mcp-server"), nats.MaxReconnects(-1), nats.ReconnectWait(500 * time.Millisecond)}, auth...)
	nc, err := nats.Connect(conn.URL, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-server: connecting to %s%s: %v (--nats-url, --context)\n", conn.URL, conn.URLSource(), err)
		return 1
	}
	defer nc.Close()
	cfg.NC = nc
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "mcp-server", Version: mcpdoor.Version, HTTPAddr: *httpAddr,
		OTLPEndpoint: *otlpEndpoint, OTLPFromEnv: *otlpEndpoint == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "", OTLPInsecure: *otlpInsecure}, log)
	if err != nil {
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 2
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Close(sctx)
	}()
	cfg.Tracer, cfg.Meter = tel.Tracer, tel.Meter("github.com/agentbull/toolruntime/mcpdoor")
	door, err := mcpdoor.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "mcp-server: --listen %s: %v\n", *listen, err)
		return 2
	}
	if *dev != "" {
		log.Warn("DEV PRINCIPAL: every request on this address runs as this principal with no token; for trials on loopback only", "principal", *dev, "listen", ln.Addr().String())
	}
	log.Info("mcp-server serving", "url", "http://"+ln.Addr().String()+mcpdoor.Path, "nats", nc.ConnectedUrlRedacted())
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{
		Handler:           door,
		MaxHeaderBytes:    16 << 10,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		// No WriteTimeout: a call's SSE stream lasts as long as the call;
		// the door gives each write its own deadline instead.
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	tel.SetReady(true)
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "mcp-server:", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return 0
}

// loopbackListen reports whether a --listen address is on loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseSealKey reads a seal key: 64 hex digits (openssl rand -hex 32).
func parseSealKey(s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != mcpdoor.SealKeyBytes {
		return nil, fmt.Errorf("a seal key is %d bytes as %d hex digits (openssl rand -hex %d)", mcpdoor.SealKeyBytes, 2*mcpdoor.SealKeyBytes, mcpdoor.SealKeyBytes)
	}
	return b, nil
}
