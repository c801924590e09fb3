package mcpdoor

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// reqState is what the door's handlers learn of one request, kept once
// in its context (withServerSlot puts it there): the server built for it,
// its principal and method, and a POST's body, read once and checked
// once. Each handler reads it from here instead of reading the body
// again or adding a context value of its own. Fields are set by the
// request's own goroutine before the next handler runs and only read
// after.
type reqState struct {
	slot   slot       // catalog.go
	p      *Principal // set by bounded
	method string     // the JSON-RPC method, set by bounded
	work   *workSlot  // floodfair.go
	body   *reqBody   // a POST's body, nil until readBody
}

// reqBody is a POST's body as the door read it: at most MaxBodyBytes
// and one more byte, and what checkBody made of it, once.
type reqBody struct {
	raw     []byte
	readErr error
	over    bool // longer than the bound: raw is cut

	checked  bool
	info     bodyInfo
	checkErr *wireError
}

// check is checkBody's verdict on the body, worked out on first use.
func (b *reqBody) check() (bodyInfo, *wireError) {
	if !b.checked {
		b.checked = true
		info, err := checkBody(b.raw)
		b.info = info
		if err != nil {
			b.checkErr = err.(*wireError)
		}
	}
	return b.info, b.checkErr
}

type reqStateKey struct{}

// withState is ctx holding st.
func withState(ctx context.Context, st *reqState) context.Context {
	return context.WithValue(ctx, reqStateKey{}, st)
}

// stateOf is the request's state, nil outside the door's handlers.
func stateOf(ctx context.Context) *reqState {
	st, _ := ctx.Value(reqStateKey{}).(*reqState)
	return st
}

// methodOf is the request's JSON-RPC method as bounded read it.
func methodOf(ctx context.Context) string {
	if st := stateOf(ctx); st != nil {
		return st.method
	}
	return ""
}

// readBody reads a POST's body once, up to max bytes and one more, and
// gives the next reader (the SDK) a reader over the same bytes. A second
// call answers what the first read. Outside the door's handlers (no
// state in the context) it reads the body for this caller only.
func readBody(r *http.Request, max int64) *reqBody {
	st := stateOf(r.Context())
	if st != nil && st.body != nil {
		return st.body
	}
	b := &reqBody{}
	b.raw, b.readErr = io.ReadAll(io.LimitReader(r.Body, max+1))
	b.over = int64(len(b.raw)) > max
	if b.readErr == nil && !b.over {
		// The whole body is read: the SDK reads these bytes.
		r.Body = io.NopCloser(bytes.NewReader(b.raw))
	} else {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b.raw), r.Body))
	}
	if st != nil {
		st.body = b
	}
	return b
}
