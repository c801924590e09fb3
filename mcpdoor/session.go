package mcpdoor

import (
	"encoding/json"
	"net/http"
	"time"
)

// sessionPurpose is the additional data of session ids: a requestState
// never opens as one, nor the reverse.
var sessionPurpose = []byte("toolruntime mcp door session v1")

// sessionFor is how long a session id is honoured.
const sessionFor = 24 * time.Hour

type sessionClaims struct {
	Principal string `json:"p"`
	Issued    int64  `json:"i"`
}

// sessions gives 2025-era clients the session id their transport
// expects, with no session kept: an initialize is answered with an
// Mcp-Session-Id sealed for the principal, any replica checks one that
// comes back (404 for one that does not open for this principal, as for
// an unknown session), and DELETE ends nothing and answers 204. The SDK's
// stateless handler never sees the id.
func (d *Door) sessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := d.principalOf(r.Context())
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && p != nil {
			plain, ok := d.seal.openBytes(sid, sessionPurpose)
			var c sessionClaims
			if !ok || json.Unmarshal(plain, &c) != nil || c.Principal != p.Name || time.Since(time.Unix(c.Issued, 0)) > sessionFor {
				writeRPCError(w, http.StatusNotFound, -32001, "session not found")
				return
			}
			r.Header.Del("Mcp-Session-Id")
			if r.Method == http.MethodDelete {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			r = d.routeCancels(r, p, sid)
		}
		if methodOf(r.Context()) == "initialize" && p != nil {
			b, _ := json.Marshal(sessionClaims{Principal: p.Name, Issued: time.Now().Unix()})
			w.Header().Set("Mcp-Session-Id", d.seal.sealBytes(b, sessionPurpose))
		}
		next.ServeHTTP(w, r)
	})
}
