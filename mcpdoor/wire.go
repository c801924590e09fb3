package mcpdoor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxJSONDepth bounds the nesting of a request body: deeper bodies are
// refused before any parser builds them.
const maxJSONDepth = 128

// wireError is a body refused before the SDK reads it: a JSON-RPC error
// code and its message.
type wireError struct {
	code int
	msg  string
}

func (e *wireError) Error() string { return e.msg }

// checkBody reads a POST body as the door accepts it: UTF-8 JSON, one
// JSON-RPC message or a batch of them, nested at most maxJSONDepth deep,
// with no object naming a key twice (at any depth: a proxy or a check
// that reads the first of two "name" keys must never see another tool
// than the one that runs, which is the last), and every message's id a
// string or an integer of 64 bits (the SDK reads ids as int64: a larger
// or fractional number would be answered under another id). A batch
// (2025-03-26) may not hold a tools/call, which would pass the bound on a
// principal's calls in flight, counted per request. It returns
//
// It returns what it read of the body: the id of a single request, for
// the errors the SDK answers without one, its method, and whether it was
// a batch.
func checkBody(b []byte) (body bodyInfo, err error) {
	if !utf8.Valid(b) {
		return body, &wireError{-32700, "parse error: the body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   []string            // an object's keys so far, while they are few
		many   map[string]struct{} // and then
		key    bool                // an object's next token is a key
		last   string              // the key whose value comes next
	}
	var stack []frame
	for {
		tok, terr := dec.Token()
		if terr == io.EOF && len(stack) == 0 {
			break
		}
		if terr == io.EOF {
			return body, &wireError{-32700, "parse error: the body ends inside a value"}
		}
		if terr != nil {
			return body, &wireError{-32700, "parse error: " + terr.Error()}
		}
		// A message is an object at depth 0, or at depth 1 of a batch;
		// a single message's params an object at depth 1.
		inMessage := len(stack) == 1 && !body.batch || len(stack) == 2 && body.batch
		inParams := len(stack) == 2 && !body.batch && stack[0].last == "params"
		if n := len(stack); n > 0 && stack[n-1].object {
			f := &stack[n-1]
			if f.key {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:n-1]
					if len(stack) == 0 {
						break
					}
					continue
				}
				k := tok.(string)
				dup := false
				if f.many != nil {
					_, dup = f.many[k]
					f.many[k] = struct{}{}
				} else {
					dup = slices.Contains(f.keys, k)
					f.keys = append(f.keys, k)
					if len(f.keys) > 16 {
						// Past a few keys a set: no quadratic scan of a hostile object.
						f.many = make(map[string]struct{}, 2*len(f.keys))
						for _, k := range f.keys {
							f.many[k] = struct{}{}
						}
					}
				}
				if dup {
					return body, &wireError{-32600, "invalid request: the key " + strconv.Quote(k) + " appears twice in one object"}
				}
				if (inMessage || inParams) && !body.batch && !body.oddKeys {
					body.oddKeys = oddKey(k)
				}
				f.key, f.last = false, k
				continue
			}
			f.key = true
			if inMessage && body.batch && f.last == "method" && tok == "tools/call" {
				return body, &wireError{-32600, "invalid request: tools/call in a batch is not served: send each call as a request of its own (a principal's bound on calls in flight, progress and cancel are per request)"}
			}
			if inMessage && !body.batch && f.last == "method" {
				body.method, _ = tok.(string)
			}
			if inParams {
				switch f.last {
				case "requestId":
					switch v := tok.(type) {
					case string:
						body.requestID, _ = json.Marshal(v)
					case json.Number:
						body.requestID = json.RawMessage(v)
					}
				case "taskId":
					var ok bool
					if body.taskID, ok = tok.(string); ok {
						body.taskIDKind = taskIDString
					} else {
						body.taskIDKind = taskIDOther
					}
				}
			}
			if inMessage && f.last == "id" {
				switch v := tok.(type) {
				case string:
					if !body.batch {
						body.id, _ = json.Marshal(v)
					}
				case json.Number:
					if _, perr := strconv.ParseInt(string(v), 10, 64); perr != nil {
						return body, &wireError{-32600, "invalid request: the id " + string(v) + " is neither a string nor an integer of 64 bits"}
					}
					if !body.batch {
						body.id = json.RawMessage(v)
					}
				case nil:
				default:
					return body, &wireError{-32600, "invalid request: the id must be a string or an integer"}
				}
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) == 0 && d == '[' {
					body.batch = true
				}
				if len(stack) >= maxJSONDepth {
					return body, &wireError{-32600, "invalid request: nested deeper than " + strconv.Itoa(maxJSONDepth)}
				}
				stack = append(stack, frame{object: d == '{', key: d == '{'})
			case ']':
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) == 0 {
			break
		}
	}
	// One value only: anything after it is not JSON-RPC.
	if _, terr := dec.Token(); terr != io.EOF {
		return body, &wireError{-32700, "parse error: data after the JSON value"}
	}
	return body, nil
}

// bodyInfo is what checkBody read of a body.
type bodyInfo struct {
	id     json.RawMessage // a single request's id
	method string          // a single message's method
	batch  bool
	// A single message's params.requestId (notifications/cancelled:
	// cancels.go), as JSON, and its params.taskId (tasks/*: taskHeaders).
	requestID  json.RawMessage
	taskID     string
	taskIDKind int
	// oddKeys: a key of the message or of its params is not plain
	// lower-case ASCII (fastcall.go).
	oddKeys bool
}

// oddKey reports whether a key holds an upper-case ASCII letter or a
// byte past ASCII. encoding/json matches keys to fields without regard
// to case ("Name" fills a field "name"), the SDK only as written: a body
// whose keys are plain lower-case ASCII reads the same in both (bytes
// past ASCII are left out too, whatever folding a decoder may do).
func oddKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// taskIDKind values: params.taskId absent, a string, anything else.
const (
	taskIDNone = iota
	taskIDString
	taskIDOther
)

// wire checks what the SDK would take as it comes and answer in plain
// text, and answers clients the SDK would refuse:
//
//   - a POST body checkBody refuses gets HTTP 400 and a JSON-RPC error;
//   - a client whose Accept lists application/json (or */*) without
//     text/event-stream, as several HTTP clients send, is answered with
//     one JSON object (jsonAnswers) instead of a 400, and one that lists
//     text/event-stream only gets the stream;
//   - the SDK's plain-text errors become JSON-RPC errors (jsonErrors).
//
// sse and jsonAnswers serve the same requests; jsonAnswers answers with
// application/json.
func (d *Door) wire(sse, jsonAnswers http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			sse.ServeHTTP(w, r)
			return
		}
		body := readBody(r, d.cfg.MaxBodyBytes)
		if body.readErr != nil {
			writeRPCError(w, http.StatusBadRequest, -32700, "reading the body: "+body.readErr.Error())
			return
		}
		if !body.over {
			info, err := body.check()
			if err != nil {
				d.m.refuse(r.Context(), "malformed")
				writeRPCError(w, http.StatusBadRequest, err.code, err.Error())
				return
			}
			// Mcp-Method is what the door's bounds and routes go by
			// (bounded, sessions) before the body is read, in every
			// protocol era: it must name the body's method, or a tools/call
			// could pass as a list.
			if hm := r.Header.Values("Mcp-Method"); len(hm) > 0 && (len(hm) > 1 || info.batch || hm[0] != info.method) {
				d.m.refuse(r.Context(), "malformed")
				// Under the request's id, as the SDK answers a mismatch.
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": info.id, "error": map[string]any{"code": mcp.CodeHeaderMismatch,
					"message": fmt.Sprintf("header mismatch: Mcp-Method header value %q does not match body value %q", strings.Join(hm, ", "), info.method)}})
				_, _ = w.Write(b)
				return
			}
		}
		switch j, s := accepts(r.Header.Values("Accept")); {
		case j && !s:
			r.Header.Set("Accept", "application/json, text/event-stream")
			jsonAnswers.ServeHTTP(w, r)
			return
		case s && !j:
			r.Header.Set("Accept", "application/json, text/event-stream")
		}
		sse.ServeHTTP(w, r)
	})
}

// checkedID is the id of a single request whose body checkBody took.
func checkedID(r *http.Request) json.RawMessage {
	st := stateOf(r.Context())
	if st == nil || st.body == nil || !st.body.checked || st.body.checkErr != nil {
		return nil
	}
	return st.body.info.id
}

// accepts reports whether an Accept header takes JSON (application/json,
// application/*, */*) and whether it takes an event stream.
func accepts(values []string) (jsonOK, sseOK bool) {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "application/json", "application/*", "*/*":
				jsonOK = true
			case "text/event-stream":
				sseOK = true
			}
		}
	}
	return jsonOK, sseOK
}

// jsonErrors turns the SDK's plain-text error answers into JSON-RPC
// errors, which clients parse: a method the door does not serve is
// -32601 under the request's id (with 200, as a JSON-RPC error of a
// request the transport delivered), a malformed message -32700, any
// other refusal -32600 with the SDK's status.
func jsonErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r)
		if !ew.plain {
			return
		}
		msg := strings.TrimSpace(ew.msg.String())
		status, code := ew.status, -32600
		var id json.RawMessage
		switch {
		case strings.HasPrefix(msg, "JSON RPC not handled") || strings.Contains(msg, "method not found"):
			code = -32601
			if id = checkedID(r); id != nil {
				status = http.StatusOK
			}
		case strings.HasPrefix(msg, "malformed payload"):
			code = -32700
		case status == http.StatusNotFound:
			code = -32001
		}
		out := map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}
		b, _ := json.Marshal(out)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Del("X-Content-Type-Options")
		w.WriteHeader(status)
		_, _ = w.Write(b)
	})
}

// errorWriter holds back an error the SDK writes as text/plain.
type errorWriter struct {
	http.ResponseWriter
	plain  bool
	status int
	msg    bytes.Buffer
	wrote  bool
}

func (e *errorWriter) WriteHeader(code int) {
	if e.wrote {
		return
	}
	e.wrote = true
	if code >= 400 && strings.HasPrefix(e.Header().Get("Content-Type"), "text/plain") && code != http.StatusMethodNotAllowed {
		e.plain, e.status = true, code
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *errorWriter) Write(b []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusOK)
	}
	if e.plain {
		// The message, cut at 4 KiB: the SDK may quote a client's
		// method or header whole.
		if room := 4<<10 - e.msg.Len(); room > 0 {
			e.msg.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return e.ResponseWriter.Write(b)
}

func (e *errorWriter) Flush() {
	if e.plain {
		return
	}
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *errorWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }
