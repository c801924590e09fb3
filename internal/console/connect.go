package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/agentbull/toolruntime/internal/tokenvault"
)

// The connect page (protocol 1.3, "Authorization needed"): a person
// connects a tenant's account of an MCP server whose tokens are kept per
// credential owner. The worker's auth.required event links here with
// ?server=<name>&key=<owner>; the page lists the servers the key may
// connect, each connected or not, with Connect and Disconnect.
//
// Connect runs the authorization code flow of mcp.Connector in a
// goroutine of this process: the flow stops at the authorization URL,
// which the page hands the person as a link (a form's redirect to another
// origin is refused by the page's form-action policy); the authorization
// server sends the browser back to /connect/callback, whose state names
// the flow, and the flow exchanges the code and puts the token in the
// vault, where every worker's next call finds it. The callback needs no
// session (the session cookie is SameSite=Strict, so a redirect from the
// authorization server comes without it): the state, unguessable and
// used once, is what binds the answer to the flow a logged-in person
// started. A flow lives in this process only, for connectFlowTTL: serve
// the callback from the console that started it (one console, or sticky
// routing).

// Bounds of the connect flows.
const (
	// maxConnectFlows is how many flows may wait for their callback at
	// once; more are refused until one ends.
	maxConnectFlows = 64
	// connectFlowTTL bounds a flow from its start to its callback.
	connectFlowTTL = 10 * time.Minute
	// connectStepWait bounds the discovery and registration before the
	// authorization URL, and the code exchange after the callback.
	connectStepWait = 45 * time.Second
	// maxShownError clips an error the authorization server sent.
	maxShownError = 1024
)

// validOwner is a credential owner as mcp.OwnerFor makes it: "fair:" and
// a fairness key, or "agent:" and an agent id.
var validOwner = regexp.MustCompile(`^(fair:[A-Za-z0-9_.:-]{1,64}|agent:[A-Za-z0-9_-]{1,64})$`)

// connectFlow is one authorization in progress.
type connectFlow struct {
	server, owner, operator string
	// authURL receives the authorization URL once the flow reached it.
	authURL chan string
	// answer receives what the callback brought back.
	answer chan answer
	// done receives the flow's end (nil: the token is in the vault).
	done chan error
}

// answer is the callback's: the code, or the authorization server's
// refusal.
type answer struct {
	res *auth.AuthorizationResult
	err error
}

// connectFlows are the flows waiting for their callback, by state.
type connectFlows struct {
	mu      sync.Mutex
	byState map[string]*connectFlow
	running int
}

// connectPages serves the connect page and its flows.
type connectPages struct {
	*Server
	flows *connectFlows
}

// connectRoutes adds the connect page's routes.
func (s *Server) connectRoutes(m *http.ServeMux) {
	if _, err := s.pages.New("connect.html").Parse(connectHTML); err != nil {
		panic(err) // the page is a constant: every test sees this
	}
	c := &connectPages{Server: s, flows: &connectFlows{byState: map[string]*connectFlow{}}}
	m.HandleFunc("GET /connect", s.authed(c.connectPage))
	m.HandleFunc("POST /connect/start", s.authed(c.connectStart))
	m.HandleFunc("POST /connect/disconnect", s.authed(c.disconnect))
	m.HandleFunc("GET /connect/callback", c.connectCallback)
}

// connectServer is one row of the page.
type connectServer struct {
	Name      string
	Connected bool
	Scopes    string
	Expiry    string
	Error     string
}

type connectView struct {
	// Configured is false when the console has no connector.
	Configured bool
	Key        string
	KeyError   string
	Servers    []connectServer
	// AuthURL is set on the page that hands the person to the
	// authorization server.
	AuthURL, AuthHost, Server string
}

func (s *connectPages) connectPage(w http.ResponseWriter, r *http.Request) {
	v := connectView{Configured: s.cfg.Connector != nil, Key: r.URL.Query().Get("key")}
	if v.Configured && v.Key != "" {
		if !validOwner.MatchString(v.Key) {
			v.KeyError = "A key is fair:<fairness key> or agent:<agent id> (as the auth.required event's link carries it)."
			w.WriteHeader(http.StatusBadRequest)
		} else {
			v.Servers = s.connectRows(r.Context(), v.Key)
		}
	}
	s.render(w, "connect.html", s.page(r, "connect", "Connect accounts", v))
}

// connectRows reads whether key holds a token of each server a person
// connects an account of.
func (s *connectPages) connectRows(ctx context.Context, key string) []connectServer {
	c := s.cfg.Connector
	var rows []connectServer
	for _, name := range c.Servers() {
		row := connectServer{Name: name}
		tok, _, err := c.Vault.Get(ctx, name, key)
		switch {
		case err == nil:
			row.Connected = true
			for i, sc := range tok.Scopes {
				if i > 0 {
					row.Scopes += " "
				}
				row.Scopes += sc
			}
			if !tok.Expiry.IsZero() {
				row.Expiry = tok.Expiry.UTC().Format("2006-01-02 15:04:05Z")
			}
		case !isNoToken(err):
			row.Error = err.Error()
		}
		rows = append(rows, row)
	}
	return rows
}

// connectForm reads and checks the server and key of a connect or
// disconnect form.
func (s *connectPages) connectForm(w http.ResponseWriter, r *http.Request) (server, key string, ok bool) {
	if s.cfg.Connector == nil {
		http.Error(w, "refused: this console connects no MCP accounts (cmd/console --mcp-config)", http.StatusNotFound)
		return "", "", false
	}
	server, key = r.PostForm.Get("server"), r.PostForm.Get("key")
	if !validOwner.MatchString(key) {
		http.Error(w, "refused: the key is not fair:<key> or agent:<id>", http.StatusBadRequest)
		return "", "", false
	}
	for _, name := range s.cfg.Connector.Servers() {
		if name == server {
			return server, key, true
		}
	}
	http.Error(w, "refused: no MCP server of that name connects accounts", http.StatusBadRequest)
	return "", "", false
}

func (s *connectPages) connectStart(w http.ResponseWriter, r *http.Request) {
	server, key, ok := s.connectForm(w, r)
	if !ok {
		return
	}
	back := "/connect?key=" + url.QueryEscape(key)
	f := &connectFlow{server: server, owner: key, operator: sessionOf(r).name,
		authURL: make(chan string, 1), answer: make(chan answer, 1), done: make(chan error, 1)}
	if !s.flows.begin() {
		s.back(w, r, back, fmt.Sprintf("Too many connections are waiting for their authorization server (%d); try again in a few minutes.", maxConnectFlows))
		return
	}
	go s.runFlow(f)
	t := time.NewTimer(connectStepWait)
	defer t.Stop()
	select {
	case u := <-f.authURL:
		host := ""
		if pu, err := url.Parse(u); err == nil {
			host = pu.Host
		}
		s.log.Info("console: mcp connect started", "server", server, "key", key, "operator", f.operator)
		s.render(w, "connect.html", s.page(r, "connect", "Connect "+server, connectView{Configured: true, Key: key, Server: server, AuthURL: u, AuthHost: host}))
	case err := <-f.done:
		s.back(w, r, back, fmt.Sprintf("Connecting %s failed before the authorization server: %v", server, err))
	case <-t.C:
		s.back(w, r, back, fmt.Sprintf("Connecting %s: the server or its authorization server did not answer in %s.", server, connectStepWait))
	}
}

// begin counts a flow in, or refuses it past maxConnectFlows.
func (fl *connectFlows) begin() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.running >= maxConnectFlows {
		return false
	}
	fl.running++
	return true
}

// runFlow runs one flow to its end, within connectFlowTTL.
func (s *connectPages) runFlow(f *connectFlow) {
	ctx, cancel := context.WithTimeout(context.Background(), connectFlowTTL)
	defer cancel()
	var state string
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, errors.New("the authorization server's authorization endpoint is not an http(s) URL")
		}
		state = u.Query().Get("state")
		if state == "" {
			return nil, errors.New("the authorization URL carries no state")
		}
		s.flows.mu.Lock()
		s.flows.byState[state] = f
		s.flows.mu.Unlock()
		f.authURL <- args.URL
		select {
		case a := <-f.answer:
			return a.res, a.err
		case <-ctx.Done():
			return nil, errors.New("nobody came back from the authorization server in time")
		}
	}
	var err error
	if !s.guard("mcp connect", func() { err = s.cfg.Connector.Connect(ctx, f.server, f.owner, fetch) }, "server", f.server, "key", f.owner) {
		err = errors.New("the console failed while connecting (its own error, logged)")
	}
	s.flows.mu.Lock()
	if state != "" {
		delete(s.flows.byState, state)
	}
	s.flows.running--
	s.flows.mu.Unlock()
	if err != nil {
		s.log.Warn("console: mcp connect failed", "server", f.server, "key", f.owner, "operator", f.operator, "err", err)
	} else {
		s.log.Info("console: mcp account connected", "server", f.server, "key", f.owner, "operator", f.operator)
	}
	f.done <- err
}

// callbackView is the page the authorization server's redirect lands on.
type callbackView struct {
	OK                bool
	Server, Key, Back string
	Error             shown
}

func (s *connectPages) connectCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	s.flows.mu.Lock()
	f := s.flows.byState[state]
	delete(s.flows.byState, state) // used once
	s.flows.mu.Unlock()
	if state == "" || f == nil {
		w.WriteHeader(http.StatusBadRequest)
		s.render(w, "connect-done", callbackView{Back: "/connect", Error: showText([]byte(
			"This answer belongs to no connection waiting here: it expired, was used already, or was started on another console."), maxShownError)})
		return
	}
	v := callbackView{Server: f.server, Key: f.owner, Back: "/connect?key=" + url.QueryEscape(f.owner)}
	if e := q.Get("error"); e != "" {
		// The authorization server's words, hostile as any: shown with
		// markers, clipped.
		msg := "The authorization server refused: " + e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		f.answer <- answer{err: errors.New(msg)}
		select { // the flow ends on the refusal at once
		case <-f.done:
		case <-time.After(connectStepWait):
		}
		w.WriteHeader(http.StatusBadGateway)
		v.Error = showText([]byte(msg), maxShownError)
		s.render(w, "connect-done", v)
		return
	}
	f.answer <- answer{res: &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}}
	t := time.NewTimer(connectStepWait)
	defer t.Stop()
	select {
	case err := <-f.done:
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			v.Error = showText([]byte(err.Error()), maxShownError)
		} else {
			v.OK = true
		}
	case <-t.C:
		w.WriteHeader(http.StatusGatewayTimeout)
		v.Error = showText([]byte("The token exchange did not end in time; reload the connect page to see whether the account is connected."), maxShownError)
	}
	s.render(w, "connect-done", v)
}

func (s *connectPages) disconnect(w http.ResponseWriter, r *http.Request) {
	server, key, ok := s.connectForm(w, r)
	if !ok {
		return
	}
	back := "/connect?key=" + url.QueryEscape(key)
	err := s.cfg.Connector.Disconnect(r.Context(), server, key)
	s.log.Info("console: mcp account disconnected", "server", server, "key", key, "operator", sessionOf(r).name, "err", err)
	if err != nil {
		s.back(w, r, back, fmt.Sprintf("Disconnected %s: the token is deleted, but its revocation failed: %v", server, err))
		return
	}
	s.back(w, r, back, fmt.Sprintf("Disconnected %s: the token is revoked where the authorization server offers it, and deleted.", server))
}

func isNoToken(err error) bool { return errors.Is(err, tokenvault.ErrNoToken) }

// connectHTML is the connect page. The authorization URL is a link (an
// http(s) URL: the flow refuses others, and html/template refuses a
// javascript: one on its own).
const connectHTML = `{{define "connect.html"}}{{template "head" .}}{{with .Data}}
<h1>Connect accounts</h1>
{{if not .Configured}}<p class="empty">This console connects no MCP accounts: start it with <code>--mcp-config</code> and the workers' token keys.</p>
{{else if .AuthURL}}<p class="intro">Connecting <b>{{.Server}}</b> for <span class="id">{{.Key}}</span>. Sign in at the authorization server; it sends you back here.</p>
<p><a class="button" id="authorize" href="{{.AuthURL}}" rel="noreferrer">Continue to {{template "vis" (vis .AuthHost)}}</a></p>
<p><a href="/connect?key={{.Key}}">Back</a></p>
{{else}}<p class="intro">The MCP servers whose accounts a tenant (fair:&lt;fairness key&gt;) or an agent (agent:&lt;id&gt;) connects. A worker's next call uses the token, with no restart; Disconnect revokes it where the authorization server offers revocation, and deletes it.</p>
<form method="get" action="/connect" class="key"><label>Key <input name="key" value="{{.Key}}" maxlength="70" placeholder="fair:tenant-42"></label> <button>Show</button></form>
{{if .KeyError}}<p class="error">{{.KeyError}}</p>{{end}}
{{if .Servers}}<table class="connect"><thead><tr><th>server</th><th>account</th><th></th></tr></thead><tbody>
{{range .Servers}}<tr><td>{{template "vis" (vis .Name)}}</td><td>{{if .Connected}}connected{{if .Scopes}}, scopes {{template "vis" (vis .Scopes)}}{{end}}{{if .Expiry}}, token until {{.Expiry}}{{end}}{{else if .Error}}<span class="error">{{template "vis" (vis .Error)}}</span>{{else}}not connected{{end}}</td>
<td><form method="post" action="/connect/start"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="server" value="{{.Name}}"><input type="hidden" name="key" value="{{$.Data.Key}}"><button name="connect">{{if .Connected}}Connect again{{else}}Connect{{end}}</button></form>
{{if .Connected}}<form method="post" action="/connect/disconnect"><input type="hidden" name="csrf" value="{{$.CSRF}}"><input type="hidden" name="server" value="{{.Name}}"><input type="hidden" name="key" value="{{$.Data.Key}}"><button name="disconnect">Disconnect</button></form>{{end}}</td></tr>
{{end}}</tbody></table>{{else if and .Key (not .KeyError)}}<p class="empty">No MCP server of this console's configuration connects accounts.</p>{{end}}
{{end}}{{end}}{{template "foot" .}}{{end}}

{{define "connect-done"}}<!doctype html>
<html lang="en" dir="ltr">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connect · toolruntime console</title>
<link rel="stylesheet" href="/static/console.css">
</head>
<body>
<main>
{{if .OK}}<h1 id="connected">Connected</h1>
<p>The account of <b>{{template "vis" (vis .Server)}}</b> is connected for <span class="id">{{template "vis" (vis .Key)}}</span>. The next call uses it.</p>
{{else}}<h1 id="failed">Not connected</h1>
{{if .Server}}<p>Connecting <b>{{template "vis" (vis .Server)}}</b> for <span class="id">{{template "vis" (vis .Key)}}</span> failed:</p>{{end}}
<p class="error" id="reason">{{template "vis" .Error}}</p>{{end}}
<p><a href="{{.Back}}">Back to the connect page</a></p>
</main>
</body>
</html>{{end}}`
