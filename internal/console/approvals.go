package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// bucketAudit is the console's own bucket: who decided or re-drove
// what, and when. The workers' it reads are protocol's (BucketState,
// StreamDead).
const bucketAudit = "CONSOLE_AUDIT"

// heldStep is the part of an approval record (TURN_STATE key
// approval.<agent>.<turn>.<step>) the console reads: docs/protocol.md,
// "Holding a step".
type heldStep struct {
	AgentID   string           `json:"agent_id"`
	TurnID    string           `json:"turn_id"`
	Step      int64            `json:"step"`
	Context   protocol.Context `json:"context"`
	Calls     []heldCall       `json:"calls"`
	ExpiresAt time.Time        `json:"expires_at"`
	State     string           `json:"state"`
}

type heldCall struct {
	CallID    string          `json:"call_id"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Valid     json.RawMessage `json:"valid"`
	Repairs   []string        `json:"repairs"`
	Approval  string          `json:"approval"`
	Activity  string          `json:"activity"`
	// ReadOnly and Destructive are the tool's flags as the worker stored
	// them with the held call; nil in records of workers before they did.
	ReadOnly    *bool `json:"read_only"`
	Destructive *bool `json:"destructive"`
}

// auditEntry is one decision or re-drive the console sent, kept in
// CONSOLE_AUDIT.
type auditEntry struct {
	Kind      string              `json:"kind"` // "decision" or "redrive"
	By        string              `json:"by"`
	At        time.Time           `json:"at"`
	AgentID   string              `json:"agent_id"`
	TurnID    string              `json:"turn_id"`
	Step      int64               `json:"step"`
	MsgID     string              `json:"msg_id"`
	Decisions []protocol.Decision `json:"decisions,omitempty"`
	Subject   string              `json:"subject,omitempty"`
	DeadSeq   uint64              `json:"dead_seq,omitempty"`
}

// maxShown is how many held steps the page shows, soonest to expire
// first.
const maxShown = 100

type approvalsView struct {
	More   int // held steps not shown
	Steps  []stepView
	Recent []auditEntry
	Error  string
}

type stepView struct {
	AgentID, TurnID, Key string
	Step                 int64
	ExpiresAt            time.Time
	TimeLeft             string
	Expired              bool
	Held                 []callView
	Others               []callView
	// Refused are earlier answers the workers dead-lettered: the step
	// waits for a correction.
	Refused []string
	Tried   int
}

type callView struct {
	Index                          int
	CallID, Name, Reason, Activity string
	Description, Flags             string
	Args                           []argLine
	Repairs                        []string
}

// argLine is one line of the formatted arguments; a long one is folded.
type argLine struct {
	Text, Head string
	Long       bool
}

// foldAt is the length past which an argument line is folded.
const foldAt = 160

// formatArgs indents the validated arguments without re-encoding them
// (json.Indent only adds white space, so every value keeps its bytes) and
// folds long lines.
func formatArgs(raw json.RawMessage) []argLine {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	return foldLines(unescapeHTML(b.Bytes()))
}

// foldLines splits text into lines, folding each longer than foldAt
// behind its head (cut on a character boundary).
func foldLines(text string) []argLine {
	var out []argLine
	for _, l := range strings.Split(text, "\n") {
		if len(l) > foldAt {
			out = append(out, argLine{Text: l, Head: textclip.Ellipsis(l, foldAt), Long: true})
			continue
		}
		out = append(out, argLine{Text: l})
	}
	return out
}

// unescapeHTML writes the escapes \u003c, \u003e and \u0026 inside the
// strings of a JSON text (Go's encoder writes <, > and & so) as the
// characters: the same JSON value, readable. The page escapes them.
func unescapeHTML(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 >= len(b) {
			out.WriteByte(c)
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch strings.ToLower(string(b[i+2 : i+6])) {
			case "003c":
				out.WriteByte('<')
				i += 5
				continue
			case "003e":
				out.WriteByte('>')
				i += 5
				continue
			case "0026":
				out.WriteByte('&')
				i += 5
				continue
			}
		}
		// Any other escape (\\ included) is kept whole.
		out.WriteByte(c)
		out.WriteByte(b[i+1])
		i++
	}
	return out.String()
}

func timeLeft(d time.Duration) string {
	if d <= 0 {
		return "expired: the workers answer it rejected"
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh %02dm left", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %02ds left", m, s)
	}
	return fmt.Sprintf("%ds left", s)
}

// pending lists the held steps of TURN_STATE, soonest to expire first.
func (s *Server) pending(ctx context.Context) ([]*heldStep, error) {
	kv, err := s.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w (is a worker running?)", protocol.BucketState, err)
	}
	lister, err := kv.ListKeysFiltered(ctx, "approval.>")
	if err != nil {
		return nil, err
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []*heldStep
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // expired or deleted since the listing
		}
		var h heldStep
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			s.log.Warn("console: an approval record does not parse", "key", k, "err", err)
			continue
		}
		if h.State == "pending" {
			out = append(out, &h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExpiresAt.Before(out[j].ExpiresAt) })
	return out, nil
}

func (s *Server) heldStep(ctx context.Context, agent, turn string, step int64) (*heldStep, error) {
	kv, err := s.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, fmt.Sprintf("approval.%s.%s.%d", agent, turn, step))
	if err != nil {
		return nil, err
	}
	var h heldStep
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return nil, err
	}
	return &h, nil
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var v approvalsView
	steps, err := s.pending(ctx)
	if err != nil {
		v.Error = err.Error()
	}
	if len(steps) > maxShown {
		v.More = len(steps) - maxShown
		steps = steps[:maxShown]
	}
	refused := s.refusedAnswers(ctx)
	now := time.Now()
	for _, h := range steps {
		sv := stepView{AgentID: h.AgentID, TurnID: h.TurnID, Step: h.Step, ExpiresAt: h.ExpiresAt.UTC(),
			TimeLeft: timeLeft(h.ExpiresAt.Sub(now)), Expired: !now.Before(h.ExpiresAt), Key: fairnessKey(h.AgentID, h.Context)}
		info := s.cats.lookup(ctx, s.gw, h)
		for i, c := range h.Calls {
			if c.Valid == nil {
				continue // refused by validation: answered when the step is decided
			}
			key := c.Name
			if c.Namespace != "" {
				key = c.Namespace + "." + c.Name
			}
			t := info[key]
			cv := callView{Index: i, CallID: c.CallID, Name: key, Reason: c.Approval, Activity: c.Activity,
				Description: t.description, Flags: c.flags(t), Args: formatArgs(c.Valid), Repairs: c.Repairs}
			if c.Approval != "" {
				sv.Held = append(sv.Held, cv)
			} else {
				sv.Others = append(sv.Others, cv)
			}
		}
		for _, d := range refused[stepRef{h.AgentID, h.TurnID, h.Step}] {
			sv.Refused = append(sv.Refused, d.reason)
			sv.Tried = max(sv.Tried, d.n)
		}
		sv.Tried = max(sv.Tried, s.answersSent(ctx, h.AgentID, h.TurnID, h.Step))
		v.Steps = append(v.Steps, sv)
	}
	v.Recent = s.recentAudit(ctx, 20)
	s.render(w, "approvals.html", s.page(r, "approvals", "Approvals", v))
}

// decide answers a held step with one decision per held call, as the
// protocol's decision message, and keeps who decided and when.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	f := r.PostForm
	agent, turn := f.Get("agent_id"), f.Get("turn_id")
	step, err := strconv.ParseInt(f.Get("step"), 10, 64)
	if err != nil || step < 0 {
		http.Error(w, "refused: step must be an integer ≥ 0", http.StatusBadRequest)
		return
	}
	h, err := s.heldStep(ctx, agent, turn, step)
	if err != nil {
		s.back(w, r, "/approvals", fmt.Sprintf("Step %d of %s/%s is not held any more (%v).", step, agent, turn, err))
		return
	}
	if h.State != "pending" {
		s.back(w, r, "/approvals", fmt.Sprintf("Step %d of %s/%s was decided already (%s): nothing sent.", step, agent, turn, h.State))
		return
	}
	var ds []protocol.Decision
	for i, c := range h.Calls {
		if c.Valid == nil || c.Approval == "" {
			continue
		}
		// The form names calls by their index in the record and repeats
		// the call id, so that a page older than the record decides
		// nothing by mistake.
		idx := strconv.Itoa(i)
		if f.Get("call."+idx) != c.CallID {
			s.back(w, r, "/approvals", fmt.Sprintf("The page did not match step %d of %s/%s: reload it and decide again.", step, agent, turn))
			return
		}
		reason := strings.TrimSpace(f.Get("reason." + idx))
		switch f.Get("decision." + idx) {
		case "approve":
			ds = append(ds, protocol.Decision{CallID: c.CallID, Approved: true, Reason: reason})
		case "reject":
			if reason == "" {
				reason = "refused by " + sessionOf(r).name
			}
			ds = append(ds, protocol.Decision{CallID: c.CallID, Reason: reason})
		default:
			s.back(w, r, "/approvals", fmt.Sprintf("Decide every held call of step %d of %s/%s (call %q has no decision): nothing sent.", step, agent, turn, c.CallID))
			return
		}
	}
	if len(ds) == 0 {
		s.back(w, r, "/approvals", "That step holds no call: nothing sent.")
		return
	}
	// n numbers the answers to the step: one past every answer seen
	// (sent from here, or dead-lettered from any gateway), so that the
	// stream's de-duplication does not drop a correction.
	n := s.answersSent(ctx, agent, turn, step)
	for _, d := range s.refusedAnswers(ctx)[stepRef{agent, turn, step}] {
		n = max(n, d.n)
	}
	n++
	se := sessionOf(r)
	if err := s.gw.Decide(ctx, agent, turn, step, n, ds); err != nil {
		s.back(w, r, "/approvals", "The decision was not sent: "+err.Error())
		return
	}
	e := auditEntry{Kind: "decision", By: se.name, At: time.Now().UTC(), AgentID: agent, TurnID: turn, Step: step,
		MsgID: approvalMsgID(agent, turn, step, n), Decisions: ds}
	s.audit(ctx, fmt.Sprintf("decision.%s.%s.%d.%d", agent, turn, step, n), e)
	s.log.Info("console: decision sent", "operator", se.name, "agent_id", agent, "turn_id", turn, "step", step, "n", n, "decisions", len(ds))
	s.back(w, r, "/approvals", fmt.Sprintf("Decision for step %d of %s/%s sent as %s.", step, agent, turn, e.MsgID))
}

func approvalMsgID(agent, turn string, step int64, n int) string {
	id := fmt.Sprintf("%s.%s.%d.approval", agent, turn, step)
	if n > 1 {
		id += "." + strconv.Itoa(n)
	}
	return id
}

func (s *Server) auditKV(ctx context.Context) (jetstream.KeyValue, error) {
	return s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucketAudit,
		Description: "the operator console's record of who decided or re-drove what, and when", TTL: 30 * 24 * time.Hour, History: 1})
}

func (s *Server) audit(ctx context.Context, key string, e auditEntry) {
	kv, err := s.auditKV(ctx)
	if err == nil {
		b, _ := json.Marshal(e)
		_, err = kv.Put(ctx, key, b)
	}
	if err != nil {
		s.log.Error("console: the audit record was not kept", "key", key, "err", err, "by", e.By)
	}
}

// answersSent is the highest n of the answers sent from here for a step.
func (s *Server) answersSent(ctx context.Context, agent, turn string, step int64) int {
	kv, err := s.auditKV(ctx)
	if err != nil {
		return 0
	}
	l, err := kv.ListKeysFiltered(ctx, fmt.Sprintf("decision.%s.%s.%d.*", agent, turn, step))
	if err != nil {
		return 0
	}
	n := 0
	for k := range l.Keys() {
		if i, err := strconv.Atoi(k[strings.LastIndexByte(k, '.')+1:]); err == nil {
			n = max(n, i)
		}
	}
	return n
}

// recentAudit reads the last limit entries of CONSOLE_AUDIT from its
// stream, newest first: a page load costs limit reads, however long the
// bucket's history.
func (s *Server) recentAudit(ctx context.Context, limit int) []auditEntry {
	if _, err := s.auditKV(ctx); err != nil {
		return nil
	}
	st, err := s.js.Stream(ctx, "KV_"+bucketAudit)
	if err != nil {
		return nil
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil
	}
	var out []auditEntry
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && len(out) < limit; seq-- {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || len(m.Data) == 0 {
			continue // deleted, or a delete marker
		}
		var a auditEntry
		if json.Unmarshal(m.Data, &a) == nil {
			out = append(out, a)
		}
	}
	return out
}

type stepRef struct {
	agent, turn string
	step        int64
}

type refusedAnswer struct {
	reason string
	n      int
}

// refusedAnswers are the answers the workers dead-lettered, by step,
// read from the last messages of TURN_DEAD.
func (s *Server) refusedAnswers(ctx context.Context) map[stepRef][]refusedAnswer {
	out := map[stepRef][]refusedAnswer{}
	for _, d := range s.deadLetters(ctx, 200) {
		if !strings.HasPrefix(d.Headers.Get(protocol.HeaderDeadSubject), "turn.approval.") || strings.Count(d.Headers.Get(protocol.HeaderDeadSubject), ".") != 3 {
			continue
		}
		var a struct {
			AgentID string `json:"agent_id"`
			TurnID  string `json:"turn_id"`
			Step    int64  `json:"step"`
		}
		if json.Unmarshal(d.Data, &a) != nil {
			continue
		}
		n := 1
		id := d.Headers.Get(protocol.HeaderDeadPrefix + jetstream.MsgIDHeader)
		if i := strings.LastIndex(id, ".approval."); i >= 0 {
			if v, err := strconv.Atoi(id[i+len(".approval."):]); err == nil {
				n = v
			}
		}
		ref := stepRef{a.AgentID, a.TurnID, a.Step}
		out[ref] = append(out[ref], refusedAnswer{reason: d.Headers.Get(protocol.HeaderDeadReason), n: n})
	}
	return out
}

// toolInfo is what the approvals page shows of a tool.
type toolInfo struct {
	description string
	// destructive: yes, no, or unknown (the worker's policy holds it
	// whatever its flags, so the catalog cannot tell).
	destructive string
}

// flags describes the call's tool: from the flags the worker stored with
// the held call, else from what the catalog tells.
func (c heldCall) flags(t toolInfo) string {
	if c.ReadOnly != nil && c.Destructive != nil {
		switch {
		case *c.Destructive:
			return "destructive: it changes or removes something that cannot be had back, and is not run again after a crash"
		case *c.ReadOnly:
			return "read-only: it changes nothing, and may run again after a crash"
		default:
			return "not read-only, not destructive: it changes something, and is not run again after a crash"
		}
	}
	return t.flags(c.Approval)
}

func (t toolInfo) flags(reason string) string {
	switch {
	case reason == "destructive" || t.destructive == "yes":
		return "destructive (not read-only): it changes something and is not run again after a crash"
	case t.destructive == "no":
		return "not destructive"
	}
	return "flags unknown: the workers' policy holds this tool whatever its flags"
}

// catalogCache keeps, per turn context, what the catalog says of each
// tool: its description, and whether it is destructive. The catalog has
// no read-only flag; a catalog asked with context.approval "destructive"
// names the destructive tools (with those the policy holds anyway, which
// a catalog asked without it names too).
type catalogCache struct {
	mu sync.Mutex
	m  map[string]cachedCatalog
}

type cachedCatalog struct {
	at    time.Time
	tools map[string]toolInfo
}

func newCatalogCache() *catalogCache { return &catalogCache{m: map[string]cachedCatalog{}} }

func (c *catalogCache) lookup(ctx context.Context, gw *gateway.Client, h *heldStep) map[string]toolInfo {
	tc := h.Context
	tc.Approval = protocol.ApprovalScope{}
	b, _ := json.Marshal(tc)
	key := h.AgentID + "/" + string(b)
	c.mu.Lock()
	if e, ok := c.m[key]; ok && time.Since(e.at) < 30*time.Second {
		c.mu.Unlock()
		return e.tools
	}
	c.mu.Unlock()
	tools := map[string]toolInfo{}
	base, err := gw.Catalog(ctx, h.AgentID, h.TurnID, tc)
	if err != nil {
		return tools
	}
	probe := tc
	probe.Approval = protocol.ApprovalScope{Level: protocol.ApprovalDestructive}
	destr, err := gw.Catalog(ctx, h.AgentID, h.TurnID, probe)
	if err != nil {
		destr = base
	}
	for name, desc := range descriptions(base.Tools, "") {
		t := toolInfo{description: desc}
		switch {
		case slices.Contains(base.Approval, name):
			t.destructive = "unknown"
		case slices.Contains(destr.Approval, name):
			t.destructive = "yes"
		default:
			t.destructive = "no"
		}
		tools[name] = t
	}
	c.mu.Lock()
	c.m[key] = cachedCatalog{at: time.Now(), tools: tools}
	c.mu.Unlock()
	return tools
}

// descriptions maps "name" or "namespace.name" to the description of
// every function of a Responses API tool list.
func descriptions(raw json.RawMessage, ns string) map[string]string {
	var defs []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Tools       json.RawMessage `json:"tools"`
	}
	out := map[string]string{}
	if json.Unmarshal(raw, &defs) != nil {
		return out
	}
	for _, d := range defs {
		switch d.Type {
		case "namespace":
			for k, v := range descriptions(d.Tools, d.Name) {
				out[k] = v
			}
		case "function":
			k := d.Name
			if ns != "" {
				k = ns + "." + d.Name
			}
			out[k] = d.Description
		}
	}
	return out
}
