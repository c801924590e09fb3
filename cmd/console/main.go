// Command console serves the operator console: approvals, live turns,
// dead letters and the fleet, in a browser. It is a separate process on
// its own NATS connection; the workers are unchanged.
//
//	go run ./cmd/console --nats-url nats://127.0.0.1:4222
//
// It prints the URL to open, with its token, as Jupyter does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/internal/natsconn"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn natsconn.Flags
	conn.Register(fs, "NATS server or cluster URLs (comma-separated); default "+nats.DefaultURL)
	listen := fs.String("listen", "127.0.0.1:8470", "address to serve on; anything but loopback without --tls-cert-file is warned about")
	tokenFile := fs.String("console-token-file", "", "file holding the console's login token (else CONSOLE_TOKEN, else one is generated and printed)")
	certFile := fs.String("tls-cert-file", "", "serve HTTPS with this certificate (and --tls-key-file)")
	keyFile := fs.String("tls-key-file", "", "the key of --tls-cert-file")
	logFormat := fs.String("log-format", "text", "text or json")
	perClient := fs.Int("max-connections-per-client", console.DefaultLimits.PerClient, "connections one client address may hold open; one more closes that address's connection waiting longest on its client (idle, trickling its request, or not reading its answer) (a proxy in front makes every client one address: raise it there)")
	total := fs.Int("max-connections", console.DefaultLimits.Total, "connections all clients together may hold open; one more closes the connection waiting longest on its client (idle, trickling its request, or not reading its answer)")
	var cf connectFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var log *slog.Logger
	if *logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	} else {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	// As the worker reads its flags, with CONSOLE_* for WORKER_*; but
	// CONSOLE_TOKEN is the login token, so --token reads NATS_TOKEN only.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	lookup := func(k string) (string, bool) {
		if k == "CONSOLE_TOKEN" {
			return "", false
		}
		v := getenv(k)
		return v, v != ""
	}
	if err := natsconn.FromEnv(fs, set, "CONSOLE", lookup); err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 2
	}
	if err := conn.Resolve(set, lookup); err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 2
	}
	if conn.URL == "" {
		conn.URL = nats.DefaultURL
	}
	if (*certFile == "") != (*keyFile == "") {
		fmt.Fprintln(stderr, "console: --tls-cert-file and --tls-key-file go together")
		return 2
	}
	token, generated := "", false
	switch {
	case *tokenFile != "":
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(stderr, "console: --console-token-file:", err)
			return 2
		}
		token = strings.TrimSpace(string(b))
	case getenv("CONSOLE_TOKEN") != "":
		token = getenv("CONSOLE_TOKEN")
	default:
		token, generated = console.GenerateToken(), true
	}
	if len(token) < 16 {
		fmt.Fprintln(stderr, "console: the token must be at least 16 characters")
		return 2
	}
	auth, err := conn.Options()
	if err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 2
	}
	opts := append([]nats.Option{nats.Name("toolruntime-console"), nats.MaxReconnects(-1), nats.ReconnectWait(500 * time.Millisecond)}, auth...)
	nc, err := nats.Connect(conn.URL, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "console: connecting to %s%s: %v (--nats-url, --context)\n", conn.URL, conn.URLSource(), err)
		return 1
	}
	defer nc.Close()
	if *perClient < 1 || *total < 1 {
		fmt.Fprintln(stderr, "console: --max-connections-per-client and --max-connections must be at least 1")
		return 2
	}
	limits := console.Limits{PerClient: *perClient, Total: *total}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "console: --listen %s: %v\n", *listen, err)
		return 2
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && *certFile == "" {
		log.Warn("the console is served WITHOUT TLS on a non-loopback address: its token and session cookie cross the network in clear; use --tls-cert-file/--tls-key-file, or --listen 127.0.0.1:PORT behind an SSH tunnel or a TLS proxy", "listen", ln.Addr().String())
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	shown := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		shown = "127.0.0.1"
	}
	base := fmt.Sprintf("%s://%s/login", scheme, net.JoinHostPort(shown, port))
	connector, err := cf.connector(ctx, nc, fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(shown, port)))
	if err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 2
	}
	srv, err := console.New(console.Config{NC: nc, Token: token, Secure: *certFile != "", Logger: log, Limits: limits, Connector: connector})
	if err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 1
	}
	if connector != nil {
		log.Info("console: connect page on", "servers", connector.Servers(), "redirect", connector.RedirectURL)
	}
	if generated {
		fmt.Fprintf(stdout, "Console at %s?token=%s\n(the token was generated for this run; set CONSOLE_TOKEN or --console-token-file to keep one)\n", base, token)
	} else {
		fmt.Fprintf(stdout, "Console at %s\n", base)
	}
	log.Info("console serving", "listen", ln.Addr().String(), "nats", nc.ConnectedUrlRedacted(), "limits", limits.String())
	if *certFile == "" {
		log.Info("console: TLS is off (no --tls-cert-file): the session cookie is not marked Secure")
	}
	ln = console.Listen(ln, limits, log)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "console:", err)
		return 1
	}
	hs := console.HTTPServer(srv, limits, ctx, log)
	errc := make(chan error, 1)
	go func() {
		if *certFile != "" {
			errc <- hs.ServeTLS(ln, *certFile, *keyFile)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "console:", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return 0
}
