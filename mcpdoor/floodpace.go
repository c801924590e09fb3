package mcpdoor

import (
	"context"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The work slots (floodfair.go) order the door's own work, but a
// principal's flood costs the machine more than that: the HTTP server,
// the SDK, the bus and the garbage collector work for every request,
// and a client that sends its next request as soon as the last is
// answered goes the faster the cheaper its answers are. So the door
// paces a principal's requests to a rate: a token bucket per principal
// (per remote address for requests refused for want of a valid token),
// sized by its weight. A request within the rate is served at once; one
// over it is held back by a timer until its token is due, so a
// closed-loop client is slowed to the rate instead of refused into
// sending again; past heldMax requests held for one key, the door
// answers 429 at once and closes the connection, so that a client with
// more connections than that must open them again to go on.

// DefaultRate is Config.Rate's default: requests a second a principal
// of weight 1 sends on one door before its excess is held back.
const DefaultRate = 200

// heldMax bounds the requests of one key held back at once.
const heldMax = 64

// pacer is token buckets by key: golang.org/x/time/rate's Limiter, which
// reserves a token ahead of time (its bucket goes below zero) and says
// when it is due, which is what holding a request until its token needs.
// What the Limiter does not keep is how many requests of a key are held
// at once (heldMax), so the pacer counts them beside it.
type pacer struct {
	rate  float64 // tokens a second for weight 1
	burst float64 // bucket size for weight 1

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	held int
}

// newPacer paces to rate requests a second (burst: one second's worth);
// a rate of zero or less is no pacer.
func newPacer(r float64) *pacer {
	if r <= 0 {
		return nil
	}
	return &pacer{rate: r, burst: math.Max(1, r), buckets: map[string]*bucket{}}
}

// reserve takes a token of key's bucket (weight scales its rate and
// size) and says how long to hold the request until the token is due;
// ok is false when heldMax requests of key are held already (nothing is
// taken then), and retry is when a token is due. A reservation that
// waits is returned, for cancel to give its token back.
func (p *pacer) reserve(key string, weight float64, now time.Time) (delay time.Duration, ok bool, retry time.Duration) {
	delay, ok, retry, _ = p.reserveAt(key, weight, now)
	return delay, ok, retry
}

func (p *pacer) reserveAt(key string, weight float64, now time.Time) (time.Duration, bool, time.Duration, *rate.Reservation) {
	if weight <= 0 {
		weight = 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buckets[key]
	if b == nil {
		p.sweep(now)
		b = &bucket{lim: rate.NewLimiter(rate.Limit(p.rate*weight), int(math.Max(1, p.burst*weight)))}
		p.buckets[key] = b
	}
	if b.lim.AllowN(now, 1) {
		return 0, true, 0, nil
	}
	if b.held >= heldMax {
		return 0, false, time.Duration((1 - b.lim.TokensAt(now)) / float64(b.lim.Limit()) * float64(time.Second)), nil
	}
	r := b.lim.ReserveN(now, 1)
	b.held++
	return r.DelayFrom(now), true, 0, r
}

// unhold ends a held request of key.
func (p *pacer) unhold(key string) {
	p.mu.Lock()
	if b := p.buckets[key]; b != nil {
		b.held--
	}
	p.mu.Unlock()
}

// sweep drops the buckets that are full again and hold nothing, at most
// once a second once there are many: remote addresses come and go.
func (p *pacer) sweep(now time.Time) {
	if len(p.buckets) < 1024 || now.Sub(p.swept) < time.Second {
		return
	}
	p.swept = now
	for k, b := range p.buckets {
		if b.held == 0 && b.lim.TokensAt(now) >= float64(b.lim.Burst()) {
			delete(p.buckets, k)
		}
	}
}

// wait holds a request of key until its token is due, on a timer. It
// reports false, with when to retry, when the request is to be refused:
// too many of key's are held, or the client went away.
func (p *pacer) wait(ctx context.Context, key string, weight float64) (bool, time.Duration) {
	if p == nil {
		return true, 0
	}
	delay, ok, retry, res := p.reserveAt(key, weight, time.Now())
	if !ok {
		return false, retry
	}
	if delay <= 0 {
		return true, 0
	}
	defer p.unhold(key)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true, 0
	case <-ctx.Done():
		// The client went away: its token goes back to the key's
		// later requests.
		res.Cancel()
		return false, delay
	}
}

// pacers are the door's: by principal, and by remote address for
// requests refused for want of a valid token.
func (d *Door) pacers() (byPrincipal, byAddr *pacer) {
	d.flightMu.Lock()
	defer d.flightMu.Unlock()
	if !d.pacersMade {
		rate := d.cfg.Rate
		if rate == 0 {
			rate = DefaultRate
		}
		d.pacePrincipal, d.paceAddr = newPacer(rate), newPacer(rate)
		d.pacersMade = true
	}
	return d.pacePrincipal, d.paceAddr
}

// refuseRate answers a request over its key's rate with too many held:
// 429, Retry-After, a JSON-RPC error, and the connection closed.
func (d *Door) refuseRate(w http.ResponseWriter, r *http.Request, retry time.Duration) {
	d.m.refuse(r.Context(), "rate")
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(retry.Seconds())))))
	writeRPCError(w, http.StatusTooManyRequests, -32000, "too many requests for this principal: over its rate")
}

// remoteHost is the host part of a request's remote address.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// pacedRefusals holds back the door's 401 answers to one remote address
// over the rate: a flood of requests without a valid token is paced
// like a principal's. Past heldMax held, it answers at once and closes
// the connection.
type pacedRefusals struct {
	http.ResponseWriter
	r    *http.Request
	p    *pacer
	done bool
}

func (w *pacedRefusals) WriteHeader(code int) {
	if code == http.StatusUnauthorized && !w.done {
		w.done = true
		if ok, _ := w.p.wait(w.r.Context(), "addr:"+remoteHost(w.r), 1); !ok {
			w.Header().Set("Connection", "close")
		}
	}
	w.done = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *pacedRefusals) Write(b []byte) (int, error) {
	w.done = true
	return w.ResponseWriter.Write(b)
}

func (w *pacedRefusals) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *pacedRefusals) Flush() {
	w.done = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}
