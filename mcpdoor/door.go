package mcpdoor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/mcpdoor/principal"
)

// Principal is one caller of the door: its token hashes or JWT subject,
// and the agent id, fairness share, bindings, MCP servers and approval
// scope of every turn it starts.
type Principal = principal.Principal

// Principals is the set a door authenticates against.
type Principals = principal.Set

// LoadPrincipals reads a principals file (docs/mcp-server.md).
func LoadPrincipals(path string) (*Principals, error) { return principal.Load(path) }

// ParsePrincipals reads a principals file's bytes.
func ParsePrincipals(b []byte) (*Principals, error) { return principal.Parse(b) }

// Path is where the door serves MCP.
const Path = "/mcp"

// The _meta keys a client may set on tools/call.
const (
	// MetaTurn names the turn a call belongs to ([A-Za-z0-9_-]{1,64}):
	// calls under one name share the turn's state (its todo list, its
	// home's files). Without it each call is a turn of its own.
	MetaTurn = "io.agentbull.toolruntime/turn"
	// MetaCall is the call's id: a retry with the same id (and the same
	// turn) picks up the first attempt's outcome instead of running again.
	MetaCall = "io.agentbull.toolruntime/call"
)

// Config configures a Door. NC and one of Principals, JWT or
// DevPrincipal are required.
type Config struct {
	// NC is the door's connection to the fleet; it stays the caller's.
	NC *nats.Conn
	// Principals authenticates bearer tokens by their SHA-256.
	Principals *Principals
	// JWT, when set, accepts JWT access tokens of one issuer; their
	// subject is looked up in Principals (jwt_sub).
	JWT *JWTConfig
	// DevPrincipal serves every request as a principal of that name
	// (agent id the same), with no token. Only for trials on loopback:
	// the door refuses requests that did not arrive on a loopback
	// address while it is set.
	DevPrincipal string
	// Resource is the public URL of the MCP endpoint
	// (https://host/mcp): the protected resource of RFC 9728 and the
	// audience JWTs must name. Empty: derived from each request.
	Resource string
	// AuthorizationServers are listed in the protected resource metadata.
	AuthorizationServers []string
	// AllowedHosts are the Host values served besides loopback names on a
	// loopback listener ("host" or "host:port"); empty allows any Host on
	// other listeners. AllowedOrigins are the browser origins allowed
	// besides those of the allowed hosts.
	AllowedHosts, AllowedOrigins []string
	// MaxBodyBytes bounds a request body (default 1 MiB).
	MaxBodyBytes int64
	// MaxInFlight bounds one principal's tools/call requests in flight on this door
	// (default 64); a principal's max_in_flight overrides it.
	MaxInFlight int
	// Rate is how many requests a second a principal of weight 1 (its
	// fairness weight scales it) sends on this door before the excess is
	// held back, and how many a remote address is refused for want of a
	// valid token (default DefaultRate; below zero: no pacing; see
	// floodpace.go).
	Rate float64
	// CatalogTTL is how long a principal's tool list is reused before
	// the workers are asked again (default 5 s), and the ttlMs clients
	// are told.
	CatalogTTL time.Duration
	// ApprovalWait bounds how long a call held for a person's approval
	// keeps its request open (default 10 min).
	ApprovalWait time.Duration
	// WriteTimeout bounds each write to a client (default 30 s), so a
	// client that stops reading does not hold the request.
	WriteTimeout time.Duration
	// TaskAfter is how long a call of a client that declared the tasks
	// extension (ExtTasks) runs before its request is answered with a
	// task handle instead of the output (default 5 s); a call held for a
	// person's approval becomes a task at once. TaskTTL is how long a
	// task id is honoured (default 1 h), TaskPollInterval the
	// pollIntervalMs clients are told (default 1 s). TaskRequired names
	// tools that run only as tasks: at once for a declaring client, and
	// refused (-32021) to a client that did not declare the extension.
	TaskAfter        time.Duration
	TaskTTL          time.Duration
	TaskPollInterval time.Duration
	TaskRequired     []string
	// SealKey (SealKeyBytes) seals the requestState of calls held for
	// approval, session ids and task ids. Every replica behind one URL needs the same key; nil
	// draws one for this door alone (its states open nowhere else).
	SealKey []byte
	// Tracer, when set, records a span per tools/call, under the trace
	// context a client put in _meta; Meter, when set, the door's metrics.
	Tracer trace.Tracer
	Meter  metric.Meter
	// Logger receives the door's logs (default slog.Default()).
	Logger *slog.Logger
}

// DefaultTaskAfter is Config.TaskAfter's default.
const DefaultTaskAfter = 5 * time.Second

// Door is the MCP server of a fleet: an http.Handler serving Path and
// the protected resource metadata under /.well-known/.
type Door struct {
	cfg  Config
	log  *slog.Logger
	gw   *gateway.Client
	js   jetstream.JetStream
	dev  *Principal
	mux  *http.ServeMux
	jwt  *jwtVerifier
	seal *sealer
	m    *instruments
	kvMu sync.Mutex
	kv   jetstream.KeyValue

	catMu    sync.Mutex
	catalogs map[string]*catalogEntry

	flightMu sync.Mutex
	gates    map[string]*gate // per principal (fastgate.go): tools/call, and every other request (tasks/* too)
	fair     *fairGate        // the door's work slots, shared fairly by principals (floodfair.go)
	// pacers of requests over a rate (floodpace.go)
	pacePrincipal, paceAddr *pacer
	pacersMade              bool

	// cancelLoops holds the steps whose tasks/cancel this replica sends
	// again until they end (taskCancel).
	cancelLoops sync.Map
}

// New builds a door.
func New(cfg Config) (*Door, error) {
	if cfg.NC == nil {
		return nil, errors.New("mcpdoor: Config.NC is required")
	}
	if cfg.Principals == nil && cfg.JWT == nil && cfg.DevPrincipal == "" {
		return nil, errors.New("mcpdoor: no way to authenticate: set Principals, JWT or DevPrincipal")
	}
	if cfg.JWT != nil && cfg.Principals == nil {
		return nil, errors.New("mcpdoor: JWT needs Principals (jwt_sub entries) to map subjects to principals")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 64
	}
	if cfg.CatalogTTL <= 0 {
		cfg.CatalogTTL = 5 * time.Second
	}
	if cfg.ApprovalWait <= 0 {
		cfg.ApprovalWait = 10 * time.Minute
	}
	if cfg.TaskAfter <= 0 {
		cfg.TaskAfter = DefaultTaskAfter
	}
	if cfg.TaskTTL <= 0 {
		cfg.TaskTTL = time.Hour
	}
	if cfg.TaskPollInterval <= 0 {
		cfg.TaskPollInterval = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	gw, err := gateway.New(cfg.NC, gateway.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.NC)
	if err != nil {
		return nil, err
	}
	d := &Door{cfg: cfg, log: cfg.Logger, gw: gw, js: js, catalogs: map[string]*catalogEntry{}, gates: map[string]*gate{}, m: newInstruments(cfg.Meter)}
	key := cfg.SealKey
	if key == nil {
		key = make([]byte, SealKeyBytes)
		_, _ = rand.Read(key)
	}
	if d.seal, err = newSealer(key); err != nil {
		return nil, err
	}
	if cfg.DevPrincipal != "" {
		if d.dev, err = principal.Dev(cfg.DevPrincipal); err != nil {
			return nil, fmt.Errorf("mcpdoor: DevPrincipal: %w", err)
		}
	}
	if cfg.JWT != nil {
		if d.jwt, err = newJWTVerifier(*cfg.JWT); err != nil {
			return nil, err
		}
	}
	sdkOpts := mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          cfg.MaxBodyBytes,
		Logger:                       sdkLogger(cfg.Logger),
	}
	sdk := mcp.NewStreamableHTTPHandler(d.server, &sdkOpts)
	// The same server for clients that accept JSON only (see wire).
	jsonOpts := sdkOpts
	jsonOpts.JSONResponse = true
	sdkJSON := mcp.NewStreamableHTTPHandler(d.server, &jsonOpts)
	served := d.wire(d.fastCalls(jsonErrors(sdk)), d.fastCalls(jsonErrors(sdkJSON)))
	var inner http.Handler = d.withServerSlot(d.bounded(d.taskHeaders(d.sessions(served))))
	if d.dev == nil {
		inner = auth.RequireBearerToken(d.verify, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL:    d.metadataURLPlaceholder(),
			AllowMissingExpiration: true,
		})(inner)
		inner = d.withMetadataURL(inner)
	}
	d.mux = http.NewServeMux()
	d.mux.Handle(Path, d.guard(inner))
	prm := http.HandlerFunc(d.serveMetadata)
	d.mux.Handle("/.well-known/oauth-protected-resource", d.guard(prm))
	d.mux.Handle("/.well-known/oauth-protected-resource"+Path, d.guard(prm))
	return d, nil
}

// ServeHTTP serves MCP at Path and the protected resource metadata.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mux.ServeHTTP(&deadlineWriter{ResponseWriter: w, timeout: d.cfg.WriteTimeout}, r)
}

// resource is the URL of the MCP endpoint as clients name it.
func (d *Door) resource(r *http.Request) string {
	if d.cfg.Resource != "" {
		return d.cfg.Resource
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + Path
}

func (d *Door) serveMetadata(w http.ResponseWriter, r *http.Request) {
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               d.resource(r),
		AuthorizationServers:   d.cfg.AuthorizationServers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "toolruntime MCP door",
	}
	auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
}

// The SDK's bearer middleware takes a fixed metadata URL; the door knows
// it per request when Resource is not configured, so it writes a
// placeholder and the wrapper below puts the request's URL in its place.
const metadataPlaceholder = "\x00resource-metadata\x00"

func (d *Door) metadataURLPlaceholder() string { return metadataPlaceholder }

func (d *Door) metadataURL(r *http.Request) string {
	res := d.resource(r)
	// RFC 9728 §3.1: the well-known path goes between host and path.
	if i := strings.Index(res, "://"); i >= 0 {
		if j := strings.IndexByte(res[i+3:], '/'); j >= 0 {
			host, path := res[:i+3+j], res[i+3+j:]
			return host + "/.well-known/oauth-protected-resource" + path
		}
		return res + "/.well-known/oauth-protected-resource"
	}
	return res
}

func (d *Door) withMetadataURL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&metadataWriter{ResponseWriter: w, url: d.metadataURL(r)}, r)
	})
}

type metadataWriter struct {
	http.ResponseWriter
	url  string
	done bool
}

func (m *metadataWriter) fix() {
	if m.done {
		return
	}
	m.done = true
	h := m.ResponseWriter.Header()
	if v := h.Values("WWW-Authenticate"); len(v) > 0 {
		for i := range v {
			v[i] = strings.ReplaceAll(v[i], fmt.Sprintf("%q", metadataPlaceholder), fmt.Sprintf("%q", m.url))
		}
	}
}

func (m *metadataWriter) WriteHeader(code int) { m.fix(); m.ResponseWriter.WriteHeader(code) }
func (m *metadataWriter) Write(b []byte) (int, error) {
	m.fix()
	return m.ResponseWriter.Write(b)
}
func (m *metadataWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
func (m *metadataWriter) Flush() {
	m.fix()
	if f, ok := m.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// principalOf is the principal a request was authenticated as.
func (d *Door) principalOf(ctx context.Context) *Principal {
	if d.dev != nil {
		return d.dev
	}
	if st := stateOf(ctx); st != nil && st.p != nil {
		return st.p
	}
	if ti := auth.TokenInfoFromContext(ctx); ti != nil {
		if p, ok := ti.Extra["principal"].(*Principal); ok {
			return p
		}
	}
	return nil
}

// verify is the bearer token check: a principals file's token, else a
// JWT of the configured issuer.
func (d *Door) verify(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	if d.cfg.Principals != nil {
		if p := d.cfg.Principals.ByToken(token); p != nil {
			return &auth.TokenInfo{UserID: p.Name, Extra: map[string]any{"principal": p}}, nil
		}
	}
	if d.jwt != nil && strings.Count(token, ".") == 2 {
		sub, exp, err := d.jwt.verify(ctx, token, d.resource(r))
		if err != nil {
			d.log.Info("mcp door: JWT refused", "err", err)
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		if p := d.cfg.Principals.BySubject(sub); p != nil {
			return &auth.TokenInfo{UserID: p.Name, Expiration: exp, Extra: map[string]any{"principal": p}}, nil
		}
		return nil, fmt.Errorf("%w: no principal for this subject", auth.ErrInvalidToken)
	}
	return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
}
