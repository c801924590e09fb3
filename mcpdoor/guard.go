package mcpdoor

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// writeRPCError answers with an HTTP status and a JSON-RPC error whose
// id is null: the request was refused before its body was read.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	_, _ = w.Write(b)
}

// loopbackHost reports whether a Host (or Origin host) names loopback.
func loopbackHost(h string) bool {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// localLoopback reports whether the request arrived on a loopback address.
func localLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return loopbackHost(a.String())
}

func (d *Door) hostAllowed(r *http.Request, host string) bool {
	if localLoopback(r) && loopbackHost(host) {
		return true
	}
	for _, a := range d.cfg.AllowedHosts {
		if strings.EqualFold(a, host) {
			return true
		}
		if h, _, err := net.SplitHostPort(host); err == nil && strings.EqualFold(a, h) {
			return true
		}
	}
	// On a loopback listener anything else is DNS rebinding; elsewhere
	// an empty list leaves Host to the proxy in front.
	return !localLoopback(r) && len(d.cfg.AllowedHosts) == 0
}

// guard refuses, before authentication, what DNS rebinding and browsers
// of other sites send: a Host not allowed, an Origin of another site.
// With a dev principal it also refuses requests not on loopback.
func (d *Door) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.dev != nil && !localLoopback(r) {
			writeRPCError(w, http.StatusForbidden, -32000, "the dev principal serves loopback only")
			return
		}
		if !d.hostAllowed(r, r.Host) {
			d.log.Info("mcp door: Host refused", "host", r.Host)
			d.m.refuse(r.Context(), "host")
			writeRPCError(w, http.StatusForbidden, -32000, "Host not allowed")
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host == "" || !(strings.EqualFold(u.Host, r.Host) && d.hostAllowed(r, u.Host) || slices.Contains(d.cfg.AllowedOrigins, o)) {
				d.log.Info("mcp door: Origin refused", "origin", o)
				d.m.refuse(r.Context(), "origin")
				writeRPCError(w, http.StatusForbidden, -32000, "Origin not allowed")
				return
			}
		}
		if _, byAddr := d.pacers(); byAddr != nil && d.dev == nil && r.URL.Path == Path {
			w = &pacedRefusals{ResponseWriter: w, r: r, p: byAddr}
		}
		next.ServeHTTP(w, r)
	})
}

// bounded holds one principal's requests in flight on this replica to
// its bound, in two gates: tools/call requests, held for the call's
// length, and every other request but the long-lived ones
// (subscriptions/listen), so that a principal's flood of lists,
// malformed or oversized requests is paced too. A request over the
// bound waits for a slot up to admitWait, and is then refused with 429
// and a JSON-RPC error: a client that floods the door is slowed to the
// pace the door serves it at, instead of taking the machine from the
// other principals. A POST's body is read once here (reqState); one over
// the bound is answered at once (413); what is left takes a door-wide
// work slot, shared fairly by the principals (floodfair.go).
func (d *Door) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := d.principalOf(r.Context())
		if p == nil {
			writeRPCError(w, http.StatusUnauthorized, -32000, "no principal")
			return
		}
		// Over its rate, a principal's request is held back before it
		// takes anything of the door's (floodpace.go).
		byPrincipal, _ := d.pacers()
		if ok, retry := byPrincipal.wait(r.Context(), "principal:"+p.Name, p.Fairness.Weight); !ok {
			d.refuseRate(w, r, retry)
			return
		}
		limit := d.cfg.MaxInFlight
		if p.MaxInFlight > 0 {
			limit = p.MaxInFlight
		}
		g := d.gateOf(p.Name, limit)
		fair := d.fairGate()
		fair.enter(p.Name)
		defer fair.leave(p.Name)
		// The body is read under the other gate (reading it is work too);
		// a tools/call then trades that slot for one of the calls gate.
		releaseOther := func() {}
		if r.Header.Get("Mcp-Method") != "subscriptions/listen" {
			release, ok := g.enter(r.Context(), g.other)
			if !ok {
				d.refuseInFlight(w, r)
				return
			}
			var once sync.Once
			releaseOther = func() { once.Do(release) }
			defer releaseOther()
		}
		// The body is read here, once, and checked once (reqState):
		// the method is the Mcp-Method header of a 2026-07-28 request
		// (wire checks it against the body), else the body's.
		st := stateOf(r.Context())
		if st == nil {
			// Outside New's chain of handlers; withServerSlot puts it there.
			st = &reqState{}
			r = r.WithContext(withState(r.Context(), st))
		}
		st.p = p
		method := r.Header.Get("Mcp-Method")
		if r.Method == http.MethodPost {
			b := readBody(r, d.cfg.MaxBodyBytes)
			switch {
			case b.readErr != nil:
				writeRPCError(w, http.StatusBadRequest, -32700, "reading the body: "+b.readErr.Error())
				return
			case b.over:
				// At once and without the SDK: a flood of them costs
				// the door a read each. A body that is not JSON the door
				// takes is wire's to refuse (checkBody).
				d.m.refuse(r.Context(), "body_size")
				writeRPCError(w, http.StatusRequestEntityTooLarge, -32600, fmt.Sprintf("request body exceeds %d bytes", d.cfg.MaxBodyBytes))
				return
			case method == "":
				info, _ := b.check()
				method = info.method
			}
		}
		st.method = method
		if method == "tools/call" {
			releaseOther()
			release, ok := g.enter(r.Context(), g.calls)
			if !ok {
				d.refuseInFlight(w, r)
				return
			}
			defer release()
		}
		if method == "subscriptions/listen" || r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			next.ServeHTTP(w, r)
			return
		}
		// The door's work on the request shares the door fairly with
		// the other principals' (floodfair.go); taken after the body is
		// read and the principal's own slot is held, so that neither a
		// slow client nor a principal over its bound holds a work slot.
		if !fair.acquire(r.Context(), p.Name, workWait) {
			d.refuseInFlight(w, r)
			return
		}
		slot := &workSlot{g: fair, name: p.Name}
		defer slot.release()
		st.work = slot
		next.ServeHTTP(&releasingWriter{ResponseWriter: w, slot: slot}, r)
	})
}

func (d *Door) refuseInFlight(w http.ResponseWriter, r *http.Request) {
	d.m.refuse(r.Context(), "in_flight")
	w.Header().Set("Retry-After", "1")
	writeRPCError(w, http.StatusTooManyRequests, -32000, "too many requests in flight for this principal")
}

// deadlineWriter gives every write to the client a deadline, so a client
// that stops reading an SSE stream ends its request instead of holding
// it; the server has no WriteTimeout, since streams are long.
type deadlineWriter struct {
	http.ResponseWriter
	timeout time.Duration
}

func (d *deadlineWriter) arm() {
	_ = http.NewResponseController(d.ResponseWriter).SetWriteDeadline(time.Now().Add(d.timeout))
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.arm()
	return d.ResponseWriter.Write(b)
}

func (d *deadlineWriter) Flush() {
	d.arm()
	_ = http.NewResponseController(d.ResponseWriter).Flush()
}

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
