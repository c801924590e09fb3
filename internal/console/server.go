package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/mcp"
)

//go:embed assets
var assets embed.FS

// Config is what a Server needs.
type Config struct {
	// NC is the console's own connection to the workers' NATS.
	NC *nats.Conn
	// Token is what a person types (or the printed URL carries) to log
	// in. Required.
	Token string
	// Secure marks the session cookie Secure: set it when served over
	// TLS.
	Secure bool
	// SessionTTL bounds a session; 12h when zero.
	SessionTTL time.Duration
	Logger     *slog.Logger
	// Limits are the console's bounds on connections and streams
	// (DefaultLimits for every zero field); serve the console with
	// HTTPServer and Listen for all of them to hold.
	Limits Limits
	// Connector, when set, serves the connect page (/connect): a person
	// connects a tenant's account of an MCP server (connect.go).
	Connector *mcp.Connector
}

// Server is the console's HTTP handler and its view of the bus.
type Server struct {
	cfg   Config
	js    jetstream.JetStream
	gw    *gateway.Client
	log   *slog.Logger
	pages *template.Template
	mux   *http.ServeMux
	token [32]byte

	mu        sync.Mutex
	sessions  map[string]*session
	badLogins logEvery // logins refused for a wrong token
	panics    logEvery // panics recovered (guard)

	stats   *stats
	keys    *keyBook
	streams streamSet // live streams open
	cats    *catalogCache
	sums    summaries
	held    listedCache
	letters *letterCache
	refused *refusedCache
	limits  Limits
	bounds  pageBounds
	// readBackWait bounds how long a decision's request waits for a
	// worker to take it (readBack).
	readBackWait time.Duration
}

type session struct {
	name    string
	csrf    string
	expires time.Time
	// flashes are the messages of redirects not yet shown, by the id
	// the redirect names (?flash=), oldest first: each is shown once,
	// on the page its own redirect loads, so that two tabs of one
	// session that decide at once are each told what became of theirs.
	flashes []flashMsg
	streams int // live streams open
}

const cookieName = "console_session"

// New builds a Server on cfg.NC. Start it for the charts and the live
// key filter to have data.
func New(cfg Config) (*Server, error) {
	if cfg.NC == nil {
		return nil, errors.New("console: no NATS connection")
	}
	if len(cfg.Token) < 16 {
		return nil, errors.New("console: the token must be at least 16 characters")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(cfg.NC)
	if err != nil {
		return nil, err
	}
	gw, err := gateway.New(cfg.NC, gateway.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, js: js, gw: gw, log: cfg.Logger, pages: pages,
		token:    sha256.Sum256([]byte(cfg.Token)),
		sessions: map[string]*session{},
		stats:    newStats(),
		keys:     newKeyBook(),
		cats:     newCatalogCache(),
		sums:     summaries{m: map[string]summary{}},
		letters:  newLetterCache(),
		refused:  newRefusedCache(),
		bounds:   pageBounds{page: pageShown, step: stepShown},
		limits:   cfg.Limits.orDefault(),

		readBackWait: 5 * time.Second,
	}
	s.routes()
	return s, nil
}

// GenerateToken returns a random token, for a console started without
// one.
func GenerateToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.authed(s.logout))
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/approvals", http.StatusSeeOther) })
	m.HandleFunc("GET /approvals", s.authed(s.approvalsPage))
	m.HandleFunc("GET /approvals/step", s.authed(s.stepPage))
	m.HandleFunc("POST /approvals/decide", s.authed(s.decide))
	m.HandleFunc("GET /live", s.authed(s.livePage))
	m.HandleFunc("GET /api/live", s.authed(s.liveEvents))
	m.HandleFunc("GET /dead", s.authed(s.deadPage))
	m.HandleFunc("GET /dead/letter", s.authed(s.letterPage))
	m.HandleFunc("POST /dead/redrive", s.authed(s.redrive))
	m.HandleFunc("GET /fleet", s.authed(s.fleetPage))
	s.connectRoutes(m)
	s.mux = m
}

// ServeHTTP sets the security headers of every answer and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer a browser sends
	// "Origin: null" on form posts, which sameOrigin refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		http.Error(w, "refused: a cross-site request", http.StatusForbidden)
		return
	}
	s.serveGuarded(s.mux, w, r)
}

// sameOrigin refuses a request a browser marks as sent from another
// site, or whose Origin is not this host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

func (s *Server) session(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[c.Value]
	if se == nil || time.Now().After(se.expires) {
		delete(s.sessions, c.Value)
		return nil
	}
	return se
}

type ctxKey struct{}

// authed refuses a request without a live session (401, with the login
// form for a page) and, for every action (a POST), one without the
// session's CSRF token (403).
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := s.session(r)
		if se == nil {
			if strings.HasPrefix(r.URL.Path, "/api/") || r.Method != http.MethodGet {
				http.Error(w, "refused: log in with the console's token first", http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusUnauthorized)
			s.render(w, "login.html", loginView{Next: r.URL.Path})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := r.ParseForm(); err != nil {
				http.Error(w, "refused: the form does not parse", http.StatusBadRequest)
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(se.csrf)) != 1 {
				http.Error(w, "refused: the form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, se)))
	}
}

func sessionOf(r *http.Request) *session { se, _ := r.Context().Value(ctxKey{}).(*session); return se }

type loginView struct {
	Token, Next, Error string
}

// logEvery counts what is logged at most once a second, with the count
// since the last line: anyone who reaches the port can post wrong
// tokens, and whoever can make one event panic can publish it at their
// rate; a line for each would let them write the console's log at that
// rate.
type logEvery struct {
	mu     sync.Mutex
	logged time.Time
	n      int
}

// tick counts one, and says whether to log a line now, with the count
// since the last line.
func (l *logEvery) tick() (n int, log bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	now := time.Now()
	if now.Sub(l.logged) < time.Second {
		return 0, false
	}
	n, l.n, l.logged = l.n, 0, now
	return n, true
}

func (s *Server) refusedLogin(remote string) {
	n, log := s.badLogins.tick()
	if !log {
		return
	}
	s.log.Warn("console login refused: wrong token", "remote", remote, "refused_since_last_line", n)
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	// The printed URL carries the token: it fills the form, and the
	// person adds the name their decisions are kept under.
	s.render(w, "login.html", loginView{Token: r.URL.Query().Get("token"), Next: r.URL.Query().Get("next")})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "refused: the form does not parse", http.StatusBadRequest)
		return
	}
	got := sha256.Sum256([]byte(r.PostForm.Get("token")))
	name := strings.TrimSpace(r.PostForm.Get("name"))
	next := r.PostForm.Get("next")
	if !localPath(next) {
		next = "/approvals"
	}
	if subtle.ConstantTimeCompare(got[:], s.token[:]) != 1 {
		s.refusedLogin(r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		s.render(w, "login.html", loginView{Next: next, Error: "That is not the console's token."})
		return
	}
	if name == "" || len(name) > 64 {
		w.WriteHeader(http.StatusBadRequest)
		s.render(w, "login.html", loginView{Token: r.PostForm.Get("token"), Next: next, Error: "Give your name (1–64 characters): it is kept with every decision you make."})
		return
	}
	id, csrf := GenerateToken(), GenerateToken()
	s.mu.Lock()
	now := time.Now()
	for k, v := range s.sessions {
		if now.After(v.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[id] = &session{name: name, csrf: csrf, expires: now.Add(s.cfg.SessionTTL)}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: s.cfg.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.cfg.SessionTTL.Seconds())})
	s.log.Info("console login", "operator", name, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// localPath reports whether next, a redirect's target, is a path on
// this console as a browser reads it: a browser drops every ASCII tab
// and newline inside a URL and reads a backslash as a slash, so that
// "/\t/evil.example" is "//evil.example", another site. Only printable
// ASCII other than the backslash and the space is a path here (the
// console's own paths are ASCII words).
func localPath(next string) bool {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return false
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: s.cfg.Secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// page is what every page's layout reads.
type page struct {
	Title, Nav, Operator, CSRF, Flash string
	Data                              any
}

func (s *Server) page(r *http.Request, nav, title string, data any) page {
	se := sessionOf(r)
	s.mu.Lock()
	flash := se.takeFlash(r.URL.Query().Get("flash"))
	s.mu.Unlock()
	return page{Title: title, Nav: nav, Operator: se.name, CSRF: se.csrf, Flash: flash, Data: data}
}

func (s *Server) render(w http.ResponseWriter, name string, v any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.ExecuteTemplate(w, name, v); err != nil {
		s.log.Error("console: render", "page", name, "err", err)
	}
}

// back redirects to path with a message shown once at its top: the
// redirect names the message (?flash=<id>), and only the page it loads
// shows it.
func (s *Server) back(w http.ResponseWriter, r *http.Request, path, flash string) {
	if se := sessionOf(r); se != nil {
		id := GenerateToken()[:16]
		s.mu.Lock()
		se.flashes = append(se.flashes, flashMsg{id, flash})
		if len(se.flashes) > maxFlashes {
			se.flashes = se.flashes[len(se.flashes)-maxFlashes:]
		}
		s.mu.Unlock()
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "flash=" + id
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// maxFlashes bounds the messages a session keeps unshown.
const maxFlashes = 16

type flashMsg struct{ id, text string }

// takeFlash removes and returns the message of redirect id; a page
// loaded without one (not through a redirect of back) shows the newest
// message not shown yet. Under s.mu.
func (se *session) takeFlash(id string) string {
	if se == nil || len(se.flashes) == 0 {
		return ""
	}
	i := len(se.flashes) - 1
	if id != "" {
		i = slices.IndexFunc(se.flashes, func(f flashMsg) bool { return f.id == id })
		if i < 0 {
			return ""
		}
	}
	text := se.flashes[i].text
	se.flashes = slices.Delete(se.flashes, i, i+1)
	return text
}
