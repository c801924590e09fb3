package mcpdoor

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's stateless handler serves every request with a session of its
// own: a JSON-RPC connection with its goroutines, the body decoded four
// or five times, the answer sent as an SSE stream. For the one request a
// busy client sends most, a plain 2026-07-28 tools/call, that is most of
// what the door adds to a call. fastCalls serves exactly those requests
// itself, with the same tool handler (callHandler) the SDK would call,
// and answers with one JSON object (Streamable HTTP lets a server answer
// a request with application/json instead of a stream). Anything else,
// or anything it is not sure of, goes to the SDK untouched: other
// methods and protocol versions, a progressToken (progress needs the
// stream), a requestState or inputResponses (an approval's retry), any
// field or header it does not know, a tool whose schema names
// x-mcp-header parameters, a body over the bound, a catalog that could
// not be read.

// fastVersion is the protocol version fastCalls serves.
const fastVersion = "2026-07-28"

// The _meta keys of a 2026-07-28 request (SEP-2575).
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// fastRequest is the whole of a request fastCalls serves: a field
// outside it sends the request to the SDK.
type fastRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type fastParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      map[string]any  `json:"_meta,omitempty"`
}

// fastCalls serves plain tools/call requests, and hands every other
// request to sdk.
func (d *Door) fastCalls(sdk http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !d.serveFast(w, r) {
			sdk.ServeHTTP(w, r)
		}
	})
}

// serveFast serves r when it is a request it knows fully, and reports
// whether it did; when not, r's body is as it came.
func (d *Door) serveFast(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header
	if r.Method != http.MethodPost || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Protocol-Version") != fastVersion ||
		h.Get("Last-Event-ID") != "" || !jsonContent(h.Get("Content-Type")) || !acceptsBoth(h.Values("Accept")) {
		return false
	}
	for k := range h {
		if strings.HasPrefix(k, "Mcp-Param-") {
			return false
		}
	}
	p := d.principalOf(r.Context())
	if p == nil {
		return false
	}
	body := readBody(r, d.cfg.MaxBodyBytes)
	if body.readErr != nil || body.over {
		return false
	}
	// wire checked the body (checkBody); keys the SDK and encoding/json
	// would read apart go to the SDK.
	if info, err := body.check(); err != nil || info.oddKeys {
		return false
	}
	req, params, ok := parseFast(body.raw)
	if !ok || h.Get("Mcp-Name") != params.Name {
		return false
	}
	e := d.entry(r)
	if e == nil || e.tools == nil {
		return false
	}
	t, ok := e.tools[params.Name]
	if !ok || t.headerParams || d.taskRequired(t.name) {
		return false
	}

	// From here the call waits for the fleet: its work slot is free.
	releaseWork(r.Context())
	call := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: params.Meta, Name: params.Name, Arguments: params.Arguments}}
	res, err := d.callHandler(p, t)(r.Context(), call)
	out := fastResponse(req.ID, res, err)
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return true
}

// parseFast reads a body as a plain 2026-07-28 tools/call: ok is false
// for anything else, which the SDK then reads.
func parseFast(body []byte) (req fastRequest, params fastParams, ok bool) {
	if strictJSON(body, &req) != nil || req.JSONRPC != "2.0" || req.Method != "tools/call" || !plainID(req.ID) ||
		strictJSON(req.Params, &params) != nil || params.Name == "" {
		return req, params, false
	}
	if v, _ := params.Meta[metaProtocolVersion].(string); v != fastVersion {
		return req, params, false
	}
	caps, ok := params.Meta[metaClientCapabilities].(map[string]any)
	if !ok {
		return req, params, false
	}
	// A client of the tasks extension may get a task instead of the
	// output: the SDK's path (taskMiddleware) answers it.
	if ext, _ := caps["extensions"].(map[string]any); hasKey(ext, ExtTasks) {
		return req, params, false
	}
	if v, ok := params.Meta[metaClientInfo]; ok {
		if _, ok := v.(map[string]any); !ok {
			return req, params, false
		}
	}
	if _, ok := params.Meta["progressToken"]; ok {
		return req, params, false
	}
	if len(params.Arguments) > 0 && !bytes.HasPrefix(bytes.TrimSpace(params.Arguments), []byte("{")) {
		return req, params, false
	}
	return req, params, true
}

// fastResponse is the JSON-RPC response to a tools/call: the result as
// the SDK writes it for a 2026-07-28 client (resultType set), or the
// handler's error as the SDK's JSON-RPC layer turns it into one.
func fastResponse(id json.RawMessage, res *mcp.CallToolResult, err error) []byte {
	type response struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}
	out := response{JSONRPC: "2.0", ID: id}
	if err == nil && res == nil {
		err = errors.New("the call ended without a result")
	}
	if err == nil {
		kind := "complete"
		if len(res.InputRequests) > 0 {
			kind = "input_required"
			if len(res.Content) > 0 || res.StructuredContent != nil {
				err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
			}
		}
		cp := *res
		if cp.Content == nil && kind == "complete" {
			cp.Content = []mcp.Content{} // as the SDK: never "content": null
		}
		// As the SDK for a 2026-07-28 client: the server's name in every
		// result's _meta, unless the result names one.
		if _, ok := cp.Meta[metaServerInfo]; !ok {
			m := make(mcp.Meta, len(cp.Meta)+1)
			for k, v := range cp.Meta {
				m[k] = v
			}
			m[metaServerInfo] = doorImpl()
			cp.Meta = m
		}
		res = &cp
		if err == nil {
			b, merr := json.Marshal(res)
			if merr != nil {
				err = merr
			} else {
				// CallToolResult's resultType is the SDK's own field; it is
				// the last member of the object the SDK writes.
				b = append(b[:len(b)-1], `,"resultType":"`+kind+`"}`...)
				out.Result = b
			}
		}
	}
	if err != nil {
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			out.Error = &jsonrpc.Error{Message: err.Error()}
		} else if wire == err {
			out.Error = wire
		} else {
			out.Error = &jsonrpc.Error{Code: wire.Code, Message: err.Error()}
		}
		out.Result = nil
	}
	b, _ := json.Marshal(out)
	return b
}

// strictJSON decodes one JSON value with no field outside v and nothing
// after it.
func strictJSON(b []byte, v any) error {
	if len(b) == 0 {
		return errors.New("empty")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// plainID reports whether a JSON-RPC id is a string or an integer.
func plainID(id json.RawMessage) bool {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return true
	}
	var n int64
	return json.Unmarshal(id, &n) == nil
}

func jsonContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// acceptsBoth reports whether Accept lists application/json and
// text/event-stream, as the SDK requires of a POST.
func acceptsBoth(values []string) bool {
	var j, s bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			switch mt {
			case "application/json":
				j = true
			case "text/event-stream":
				s = true
			}
		}
	}
	return j && s
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }
