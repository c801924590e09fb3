package mcp

import (
	"context"
	"crypto/rand"
	"math"
	"strings"
	"sync"

	"github.com/agentbull/toolruntime/tool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call whose context has a progress listener asks the server for
// progress notifications (a random progress token in the request's _meta) and
// hands each one to tool.ReportProgress of that call. Servers are
// hostile: a notification whose token is not one of this server's running
// calls, whose progress is not a finite number ≥ 0 or goes back, is
// dropped; a total that is not a finite number above 0, or is below the
// progress, is no total; the message is cut to maxProgressMessage bytes.
// Floods cost a map look-up and a lock each: the dispatcher's reporter
// publishes at most a few a second.

// maxProgressMessage bounds the message kept of a notification; the
// dispatcher clips labels further.
const maxProgressMessage = 512

// maxProgressValue is the largest progress or total taken: beyond 2^53 a
// float64 no longer counts in ones, and scaled by progressScale it still
// fits an int64.
const maxProgressValue = 1 << 53

// progressScale: once a call's progress or total has a fraction (servers
// often count from 0 to 1), its values are reported in thousandths.
const progressScale = 1000

// progressRoutes maps the progress tokens of a server's running calls to
// the calls. Tokens are random: the server's session is shared by every
// turn on the worker, and a server must not be able to aim notifications
// at the calls of other agents by counting.
type progressRoutes struct {
	mu    sync.Mutex
	calls map[string]*progressCall
}

// progressCall is one call's route: the context its reports go to and
// what it reported last.
type progressCall struct {
	ctx    context.Context
	mu     sync.Mutex
	last   float64 // the last progress taken; -1 before the first
	scaled bool    // values are reported in thousandths
}

// add routes a new token to ctx's call; remove ends the route.
func (r *progressRoutes) add(ctx context.Context) (token string, remove func()) {
	token = "tr-" + rand.Text()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]*progressCall{}
	}
	r.calls[token] = &progressCall{ctx: ctx, last: -1}
	return token, func() {
		r.mu.Lock()
		delete(r.calls, token)
		r.mu.Unlock()
	}
}

// notify handles one progress notification.
func (r *progressRoutes) notify(p *sdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return // ours are strings; JSON numbers come back as float64
	}
	r.mu.Lock()
	c := r.calls[token]
	r.mu.Unlock()
	if c == nil {
		return
	}
	c.report(p.Progress, p.Total, p.Message)
}

func (c *progressCall) report(progress, total float64, message string) {
	if !(progress >= 0 && progress <= maxProgressValue) { // NaN fails both
		return
	}
	if !(total > 0 && total <= maxProgressValue) || total < progress {
		total = 0
	}
	c.mu.Lock()
	if progress < c.last {
		c.mu.Unlock()
		return
	}
	c.last = progress
	if progress != math.Trunc(progress) || total != math.Trunc(total) {
		c.scaled = true
	}
	scale := 1.0
	if c.scaled {
		scale = progressScale
	}
	if len(message) > maxProgressMessage {
		message = cut(message, maxProgressMessage)
	}
	// Rounded down, so done never claims more than the server did. Under
	// the lock, so reports keep the order of the notifications; the
	// reporter never blocks.
	tool.ReportProgress(c.ctx, int64(math.Floor(progress*scale)), int64(math.Floor(total*scale)), strings.TrimSpace(message))
	c.mu.Unlock()
}

// requestProgress asks for progress notifications in params when ctx's
// call has a listener; the returned func ends the route.
func (s *server) requestProgress(ctx context.Context, params *sdk.CallToolParams) func() {
	if !tool.ProgressWanted(ctx) {
		return func() {}
	}
	token, remove := s.progress.add(ctx)
	params.SetProgressToken(token)
	return remove
}
