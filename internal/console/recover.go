package console

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"time"
)

// The console handles bytes that a model, a tool, a gateway or a client
// chose: in NATS callbacks (the live streams, the charts, the key
// filter), in the goroutines it starts (the approval records' watch, a
// decision's settling, a connection's flow) and in its HTTP handlers. A
// panic in any of them, a bug that a hostile value reaches, must cost
// that value its rendering, not the console its process: a NATS
// callback or a goroutine has no recover, and its panic ends the
// console for every operator. Each such place runs under guard, and
// ServeHTTP recovers a handler's panic itself (net/http would recover
// it too, but only by dropping the connection, so the operator sees a
// page that failed to load and is told nothing).

// panicked logs a recovered panic v of where (at most a line a second,
// with the count since the last one and this one's stack).
func (s *Server) panicked(where string, v any, attrs ...any) {
	n, log := s.panics.tick()
	if !log {
		return
	}
	args := append([]any{"where", where, "panic", fmt.Sprint(v), "panics_since_last_line", n, "stack", string(debug.Stack())}, attrs...)
	s.log.Error("console: recovered from a panic: the value it was handling is shown as unrenderable or dropped; the console goes on serving", args...)
}

// guard runs f, and reports false when f panicked: the panic is logged
// (panicked) with attrs, and ends there.
func (s *Server) guard(where string, f func(), attrs ...any) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			s.panicked(where, v, attrs...)
			ok = false
		}
	}()
	f()
	return true
}

// serveGuarded serves r with h, recovering a panic of h: when h has
// written nothing, the operator gets a page saying the console failed
// on this request and goes on (500, with a reference to the log line's
// time); when h has written part of its answer, the connection is
// dropped (http.ErrAbortHandler), so that no half page is taken for a
// whole one (a live stream's page opens its stream again).
func (s *Server) serveGuarded(h http.Handler, w http.ResponseWriter, r *http.Request) {
	ww := &watchedWriter{ResponseWriter: w}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		s.panicked("http handler", v, "method", r.Method, "path", r.URL.Path)
		if ww.wrote {
			panic(http.ErrAbortHandler)
		}
		http.Error(w, fmt.Sprintf("The console failed on this request (its own error, logged at %s UTC). It goes on serving: go back, or open another page.",
			time.Now().UTC().Format(time.DateTime)), http.StatusInternalServerError)
	}()
	h.ServeHTTP(ww, r)
}

// watchedWriter notes whether anything of an answer was written.
type watchedWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *watchedWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *watchedWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// deadlines of the live stream).
func (w *watchedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
