package mcpdoor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/nats-io/nats.go"
)

// A 2025-11-25 client cancels a call with notifications/cancelled, a POST
// of its own that may reach another replica than the one running the
// call, and the SDK's stateless handler ends a handler's context with
// the request only for 2026-07-28 requests. So the replica that takes
// the notification publishes it on core NATS, under a subject made from
// the principal, the client's session id and the cancelled request's id,
// and the replica running that call listens there while it runs. Nothing
// is stored: a notification that comes when no replica runs the call
// cancels nothing, as the protocol allows.

// cancelPrefix is the subject prefix of routed cancels; the rest is a
// digest, so no client-chosen bytes reach a subject.
const cancelPrefix = "mcpdoor.cancel."

// cancelSubjectKey holds, in a tools/call's context, the subject its
// cancel comes on.
type cancelSubjectKey struct{}

// cancelSubject names the call of request id in the session sid of
// principal p. Only the holder of the session (sealed for p) can name it.
func cancelSubject(p *Principal, sid string, id json.RawMessage) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(p.Name), []byte(sid), bytes.TrimSpace(id)} {
		h.Write([]byte{byte(len(part) >> 8), byte(len(part))})
		h.Write(part)
	}
	return cancelPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}

// routeCancels is called for a request of a checked session sid: a
// tools/call learns where its cancel would come, a notifications/cancelled
// is published there.
func (d *Door) routeCancels(r *http.Request, p *Principal, sid string) *http.Request {
	st := stateOf(r.Context())
	if st == nil || st.body == nil || st.body.over {
		return r
	}
	// The ids as checkBody read them, a string id in one spelling: the
	// call's and its cancel's meet whatever escapes the client wrote.
	info, err := st.body.check()
	if err != nil {
		return r // wire refuses it
	}
	switch {
	case st.method == "tools/call" && len(info.id) > 0:
		return r.WithContext(context.WithValue(r.Context(), cancelSubjectKey{}, cancelSubject(p, sid, info.id)))
	case st.method == "notifications/cancelled" && len(info.requestID) > 0:
		if err := d.cfg.NC.Publish(cancelSubject(p, sid, info.requestID), nil); err != nil {
			d.log.Warn("a client's cancel was not passed on", "principal", p.Name, "err", err)
		}
	}
	return r
}

// cancellable returns ctx, ended when a routed cancel for this call
// comes, and the function that stops listening.
func (d *Door) cancellable(ctx context.Context) (context.Context, func()) {
	subject, _ := ctx.Value(cancelSubjectKey{}).(string)
	if subject == "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	sub, err := d.cfg.NC.Subscribe(subject, func(*nats.Msg) { cancel() })
	if err != nil {
		d.log.Warn("this call cannot be cancelled by notification", "err", err)
		return ctx, cancel
	}
	return ctx, func() { _ = sub.Unsubscribe(); cancel() }
}
