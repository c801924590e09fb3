package console

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
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
	// Round numbers the holds of a step held for input again.
	Round int `json:"round"`
	// Resolution is what decided the step (the record's "verdict"): the
	// TURN_APPROVALS sequence of the answer that decided it.
	Resolution *struct {
		By  string `json:"by"`
		Seq uint64 `json:"seq"`
	} `json:"verdict"`
	// StepDigest: the worker that held the step accepts the digest bound
	// to the step (protocol.StepDecisionDigest).
	StepDigest bool `json:"step_digest"`
	// pre is what the list shows of the record, for a record read for
	// the list (listed): its calls' Valid are then dropped.
	pre *listedPre
}

// digest is what a decision for c carries and its form repeats: bound
// to the agent, turn, step and round where the holding worker accepts
// it (a decision then decides nothing but this hold, even where another
// holds the same call id and arguments), else the call's alone.
func (h *heldStep) digest(c heldCall) string {
	if h.StepDigest {
		return protocol.StepDecisionDigest(h.AgentID, h.TurnID, h.Step, h.Round, c.CallID, c.Namespace, c.Name, c.Valid)
	}
	return protocol.DecisionDigest(c.CallID, c.Namespace, c.Name, c.Valid)
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
	// Input is the hold of a call waiting mid-run for a person's input
	// (protocol 1.3; Approval is then "input").
	Input *inputHold `json:"input"`
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
	// Seq is the answer's TURN_APPROVALS sequence; Outcome what became
	// of it: "sending", "sent" (no worker had taken a decision yet when
	// the console looked), "decided" (this answer decided the step),
	// "lost" (another answer, the timeout or a cancel decided it first;
	// DecidedBy says which), "duplicate" (its message id was taken: sent
	// again under the next number), "failed".
	Seq       uint64 `json:"seq,omitempty"`
	Outcome   string `json:"outcome,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
}

// stepsPerPage is how many held steps a page of /approvals shows, soonest
// to expire first; argsShown is how much of one call's arguments the
// list shows (a step with more is shown whole on its own page, and only
// there may its calls be approved).
const (
	stepsPerPage = 20
	argsShown    = 64 << 10
	// pageShown bounds what the list's arguments weigh together (a held
	// step holds up to ~800 calls, and a marker weighs twenty times the
	// bytes it names): the calls past it are not listed, and their step
	// must be opened. stepShown bounds one step's page: a step whose
	// calls weigh more is shown clipped, and may only be rejected here.
	// callWeight is what a call weighs on the page beside its arguments.
	pageShown  = 2 << 20
	stepShown  = 8 << 20
	callWeight = 1200
)

type approvalsView struct {
	Steps  []stepView
	Recent []auditEntry
	Error  string
	// Page (from 1) of Pages; Total held steps.
	Page, Pages, Total int
	// Single is the page of one step: every byte of it shown.
	Single bool
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
	// Clipped: a call's arguments are longer than the list shows, or
	// some calls are not listed (Unlisted); its step's page (URL) shows
	// them whole and offers Approve. On the step's own page, Clipped says
	// that the step weighs more than one page shows (stepShown): no
	// Approve is offered anywhere.
	Clipped  bool
	Unlisted int
	URL      string
	// Shown is the step's pageDigest as the page drew it.
	Shown string
}

// pageBounds are the weights of page the list's arguments share (page)
// and a step's own page may show (step): pageShown and stepShown.
type pageBounds struct{ page, step int }

// pageDigest identifies all of a held step that a person decides on:
// the step and its round, and every call (held or not): its id, tool,
// arguments, why it is held, and the question of an input request. The
// form carries it, and a step whose record changed since the page was
// drawn decides nothing: a call that needs no approval replaced, or
// the next round of an input request (same call, same arguments, so
// the same DecisionDigest, but another question) answered with the
// answer to the last one.
func pageDigest(h *heldStep) string {
	hs := sha256.New()
	put := func(b []byte) {
		hs.Write([]byte(strconv.Itoa(len(b))))
		hs.Write([]byte{':'})
		hs.Write(b)
	}
	put([]byte(h.AgentID))
	put([]byte(h.TurnID))
	put([]byte(strconv.FormatInt(h.Step, 10)))
	put([]byte(strconv.Itoa(h.Round)))
	for _, c := range h.Calls {
		put([]byte(c.CallID))
		put([]byte(c.Namespace))
		put([]byte(c.Name))
		put(c.Valid)
		put([]byte(c.Approval))
		if c.Input != nil {
			put([]byte(c.Input.Request.Message))
			put(c.Input.Request.RequestedSchema)
		}
	}
	return base64.RawURLEncoding.EncodeToString(hs.Sum(nil))
}

type callView struct {
	Index                          int
	CallID, Name, Reason, Activity string
	Description, Flags             string
	Args                           shown
	Repairs                        []string
	Digest                         string
	// Script says how many characters of the arguments are outside
	// printable ASCII (each named on the page) and warns when their
	// letters are of several scripts; empty when all are ASCII.
	Script string
	// An input request: the server's message and the requested fields.
	Input   bool
	Message shown
	Fields  []inputField
}

// scriptNote is a call's Script.
func scriptNote(b []byte) string {
	n, scripts := scriptsOf(b)
	if n == 0 {
		return ""
	}
	note := fmt.Sprintf("%d character(s) outside printable ASCII, each named below", n)
	if len(scripts) > 1 {
		note += "; letters of several scripts (" + strings.Join(scripts, ", ") + "): a look-alike letter runs as what it is, not as what it looks like"
	}
	return note
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

// summary is what the list needs of an approval record to order and
// page it, kept by the record's revision.
type summary struct {
	rev       uint64
	pending   bool
	expiresAt time.Time
}

// summaries is the summary of every approval record, kept by one watch
// of TURN_STATE's approval keys that the console holds open for as long
// as its connection lasts (started by the first page that lists them):
// a page load costs what it shows, not what is held. A listing of every
// key at each load cost 1.1 s beside 40,000 held steps, and passed the
// page's 10 s on a loaded machine beside 10,000.
type summaries struct {
	mu sync.Mutex
	m  map[string]summary
	// running: a watch is open; synced is closed once it has delivered
	// every record there was when it started (a new one for each
	// watch).
	running bool
	synced  chan struct{}
	// seen is the highest revision the watch delivered.
	seen uint64
}

// summarize is the summary of one approval record's value.
func (s *Server) summarize(key string, rev uint64, value []byte) summary {
	var h struct {
		ExpiresAt time.Time `json:"expires_at"`
		State     string    `json:"state"`
	}
	if err := json.Unmarshal(value, &h); err != nil {
		s.log.Warn("console: an approval record does not parse", "key", key, "err", err)
	}
	return summary{rev: rev, pending: h.State == "pending", expiresAt: h.ExpiresAt}
}

// watchHeld starts the watch of the approval records, unless one is
// open, and returns the channel closed once it is in step.
func (s *Server) watchHeld(ctx context.Context) (<-chan struct{}, error) {
	s.sums.mu.Lock()
	defer s.sums.mu.Unlock()
	if s.sums.running {
		return s.sums.synced, nil
	}
	kv, err := s.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w (is a worker running?)", protocol.BucketState, err)
	}
	// The watch lives as long as the connection (its updates end when
	// the connection closes), not as long as the page that started it.
	w, err := kv.WatchFiltered(context.WithoutCancel(ctx), []string{"approval.>"})
	if err != nil {
		return nil, err
	}
	synced := make(chan struct{})
	s.sums.running, s.sums.synced = true, synced
	s.sums.m, s.sums.seen = map[string]summary{}, 0
	go func() {
		defer func() {
			_ = w.Stop()
			s.sums.mu.Lock()
			s.sums.running = false
			s.sums.mu.Unlock()
		}()
		inStep := false
		for e := range w.Updates() {
			if e == nil {
				if !inStep {
					inStep = true
					close(synced)
				}
				continue
			}
			var sm summary
			put := e.Operation() == jetstream.KeyValuePut
			if put && !s.guard("approval record", func() { sm = s.summarize(e.Key(), e.Revision(), e.Value()) }, "key", e.Key()) {
				sm = summary{rev: e.Revision()} // as a record that does not parse
			}
			s.sums.mu.Lock()
			if put {
				s.sums.m[e.Key()] = sm
			} else {
				delete(s.sums.m, e.Key())
			}
			s.sums.seen = max(s.sums.seen, e.Revision())
			s.sums.mu.Unlock()
		}
	}()
	return synced, nil
}

// pending lists the keys of the held steps of TURN_STATE, soonest to
// expire first, from the watch's summaries, once the watch has seen the
// newest approval record there is when the page asks (a step held just
// before is listed), with each one's revision as the watch saw it last.
// Records the bucket's TTL
// removed (no watch sees that) are those below the stream's first
// sequence: a removal by age goes in sequence order, and every other
// removal or change is a watched delete or put.
func (s *Server) pending(ctx context.Context) ([]string, map[string]uint64, error) {
	synced, err := s.watchHeld(ctx)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-synced:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("the approval records were not all read in time: %w", ctx.Err())
	}
	st, err := s.js.Stream(ctx, "KV_"+protocol.BucketState)
	if err != nil {
		return nil, nil, err
	}
	newest, err := newestApproval(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	for {
		s.sums.mu.Lock()
		seen := s.sums.seen
		s.sums.mu.Unlock()
		if seen >= newest {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("the approval records were not all read in time: %w", ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, nil, err
	}
	first := info.State.FirstSeq
	type held struct {
		key string
		at  time.Time
	}
	var out []held
	revs := map[string]uint64{}
	s.sums.mu.Lock()
	for k, sm := range s.sums.m {
		switch {
		case sm.rev < first:
			delete(s.sums.m, k)
		case sm.pending:
			out = append(out, held{k, sm.expiresAt})
			revs[k] = sm.rev
		}
	}
	s.sums.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.Before(out[j].at)
		}
		return out[i].key < out[j].key
	})
	keys := make([]string, len(out))
	for i, h := range out {
		keys[i] = h.key
	}
	return keys, revs, nil
}

// newestApproval is the stream sequence of the newest approval record,
// 0 when there is none. It is read as headers only (a consumer that
// delivers the last record of the approval keys, without its value):
// the record itself may weigh a megabyte, and reading it whole at every
// list load cost the load its bytes again.
func newestApproval(ctx context.Context, st jetstream.Stream) (uint64, error) {
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true,
		InactiveThreshold: time.Minute, DeliverPolicy: jetstream.DeliverLastPolicy,
		FilterSubject: "$KV." + protocol.BucketState + ".approval.>", MemoryStorage: true, Replicas: 1})
	if err != nil {
		return 0, err
	}
	defer func() { _ = st.DeleteConsumer(context.WithoutCancel(ctx), cons.CachedInfo().Name) }()
	if cons.CachedInfo().NumPending == 0 {
		return 0, nil
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return 0, err
	}
	for m := range b.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return 0, err
		}
		return md.Sequence.Stream, nil
	}
	// Removed by age since the consumer was made: none is newer than
	// what the watch has seen.
	return 0, b.Error()
}

func (s *Server) record(ctx context.Context, key string) (*heldStep, error) {
	kv, err := s.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var h heldStep
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return nil, err
	}
	return &h, nil
}

func (s *Server) heldStep(ctx context.Context, agent, turn string, step int64) (*heldStep, error) {
	return s.record(ctx, fmt.Sprintf("approval.%s.%s.%d", agent, turn, step))
}

// approvalsPage lists a page of the held steps; each call's arguments
// are shown up to argsShown bytes.
func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var v approvalsView
	keys, revs, err := s.pending(ctx)
	if err != nil {
		v.Error = err.Error()
	}
	v.Total = len(keys)
	v.Pages = max(1, (len(keys)+stepsPerPage-1)/stepsPerPage)
	v.Page = 1
	if p, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && p > 1 {
		v.Page = min(p, v.Pages)
	}
	keys = keys[min(len(keys), (v.Page-1)*stepsPerPage):min(len(keys), v.Page*stepsPerPage)]
	var steps []*heldStep
	for _, k := range keys {
		if h, err := s.listed(ctx, k, revs[k]); err == nil && h.State == "pending" {
			steps = append(steps, h)
		}
	}
	v.Steps = s.stepViews(ctx, steps, argsShown, s.bounds.page, false)
	v.Recent = s.recentAudit(ctx, 20)
	s.render(w, "approvals.html", s.page(r, "approvals", "Approvals", v))
}

// stepPage shows one held step whole: every byte of every call.
func (s *Server) stepPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	q := r.URL.Query()
	step, err := strconv.ParseInt(q.Get("step"), 10, 64)
	if err != nil || !protocol.ValidID(q.Get("agent")) || !protocol.ValidID(q.Get("turn")) {
		http.Error(w, "agent, turn and step name a held step", http.StatusBadRequest)
		return
	}
	v := approvalsView{Single: true, Page: 1, Pages: 1}
	h, err := s.heldStep(ctx, q.Get("agent"), q.Get("turn"), step)
	switch {
	case err != nil:
		v.Error = fmt.Sprintf("Step %d of %s/%s is not held (%v).", step, q.Get("agent"), q.Get("turn"), err)
	case h.State != "pending":
		v.Error = fmt.Sprintf("Step %d of %s/%s was decided already (%s).", step, q.Get("agent"), q.Get("turn"), h.State)
	default:
		v.Total = 1
		v.Steps = s.stepViews(ctx, []*heldStep{h}, 0, s.bounds.step, true)
	}
	s.render(w, "approvals.html", s.page(r, "approvals", "Held step", v))
}

// fit is how the calls of steps are shown within a page's weight: each
// call's arguments up to perCall bytes of page (0: all), all of them up
// to budget, each step up to an equal share of what the steps before it
// left (a step of one agent's heavy calls cannot push another agent's
// step off the list). On a list (whole false) the calls past a step's
// share are not listed (unlisted, by step); on a step's own page every
// call is listed, those past the budget with none of their arguments
// shown.
func fit(steps []*heldStep, perCall, budget int, whole bool) (args map[*heldStep][]*shown, unlisted map[*heldStep]int) {
	args, unlisted = map[*heldStep][]*shown{}, map[*heldStep]int{}
	left := budget
	for k, h := range steps {
		share := left / (len(steps) - k)
		views := make([]*shown, len(h.Calls))
		for i, c := range h.Calls {
			if !h.valid(i) {
				continue
			}
			if !whole && (share < callWeight || h.pre != nil && h.pre.args[i] == nil) {
				unlisted[h]++
				continue
			}
			share -= callWeight
			left -= callWeight
			lim := perCall
			if lim <= 0 || lim > share {
				lim = share
			}
			var v shown
			switch {
			case h.pre != nil && lim <= 0:
				v = shown{Total: h.pre.args[i].Total, LeftOut: h.pre.args[i].Total}
			case h.pre != nil:
				// The list's arguments (perCall, argsShown) as prepare
				// showed them, within this step's share.
				v = h.pre.args[i].clip(min(lim, argsShown))
			case lim <= 0:
				v = shown{Total: len(c.Valid), LeftOut: len(c.Valid)}
			default:
				v = showJSON(c.Valid, lim)
			}
			share -= v.Cost
			left -= v.Cost
			views[i] = &v
		}
		args[h] = views
	}
	return args, unlisted
}

// wholeOnItsPage reports whether every call of h is shown whole on the
// step's own page: only then may its calls be approved.
func wholeOnItsPage(h *heldStep, stepShown int) bool {
	args, _ := fit([]*heldStep{h}, 0, stepShown, true)
	for _, v := range args[h] {
		if v != nil && v.Clipped() {
			return false
		}
	}
	return true
}

// stepViews are the held steps as the page shows them, within fit's
// bounds.
func (s *Server) stepViews(ctx context.Context, steps []*heldStep, perCall, budget int, whole bool) []stepView {
	refused := s.refusedAnswers(ctx, steps)
	now := time.Now()
	shownArgs, unlisted := fit(steps, perCall, budget, whole)
	var out []stepView
	for _, h := range steps {
		sv := stepView{AgentID: h.AgentID, TurnID: h.TurnID, Step: h.Step, ExpiresAt: h.ExpiresAt.UTC(),
			TimeLeft: timeLeft(h.ExpiresAt.Sub(now)), Expired: !now.Before(h.ExpiresAt), Key: fairnessKey(h.AgentID, h.Context),
			URL: "/approvals/step?" + url.Values{"agent": {h.AgentID}, "turn": {h.TurnID}, "step": {strconv.FormatInt(h.Step, 10)}}.Encode()}
		info := s.cats.lookup(ctx, s.gw, h)
		sv.Unlisted = unlisted[h]
		sv.Shown = h.shownDigest()
		sv.Clipped = sv.Unlisted > 0
		for i, c := range h.Calls {
			if !h.valid(i) || shownArgs[h][i] == nil {
				continue // refused by validation (answered when the step is decided), or not listed
			}
			key := c.Name
			if c.Namespace != "" {
				key = c.Namespace + "." + c.Name
			}
			t := info[key]
			cv := callView{Index: i, CallID: c.CallID, Name: key, Reason: c.Approval, Activity: c.Activity,
				Description: t.description, Flags: c.flags(t), Args: *shownArgs[h][i], Repairs: c.Repairs,
				Digest: h.callDigest(i), Script: h.script(i)}
			if c.Input != nil {
				cv.Input, cv.Message, cv.Fields = true, showText([]byte(c.Input.Request.Message), maxShortShown), inputFields(c.Input.Request.RequestedSchema)
			}
			sv.Clipped = sv.Clipped || cv.Args.Clipped()
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
		out = append(out, sv)
	}
	return out
}

// decide answers a held step with one decision per held call, as the
// protocol's decision message, and keeps who decided and when. Two
// operators who answer the same step at once each send an answer of
// their own (an answer number reserved with a create-only write), both
// reach the workers, the first decides; each is then told whether
// theirs is the one that decided, read back from the step's record.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	f := r.PostForm
	agent, turn := f.Get("agent_id"), f.Get("turn_id")
	step, err := strconv.ParseInt(f.Get("step"), 10, 64)
	if err != nil || step < 0 || !protocol.ValidID(agent) || !protocol.ValidID(turn) {
		http.Error(w, "refused: agent_id and turn_id are ids, step an integer ≥ 0", http.StatusBadRequest)
		return
	}
	back := f.Get("back")
	if back != "step" {
		back = "/approvals"
	} else {
		back = "/approvals/step?" + url.Values{"agent": {agent}, "turn": {turn}, "step": {strconv.FormatInt(step, 10)}}.Encode()
	}
	h, err := s.heldStep(ctx, agent, turn, step)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// The step's record is gone (decided, then removed by the
		// bucket's age bound or by an operator): an answer too late,
		// kept like the one that finds the step decided.
		e := auditEntry{Kind: "decision", By: sessionOf(r).name, At: time.Now().UTC(), AgentID: agent, TurnID: turn, Step: step,
			Outcome: "lost", DecidedBy: "an earlier answer (the step's record is gone)"}
		s.audit(ctx, fmt.Sprintf("decision.%s.%s.%d.late-%s", agent, turn, step, GenerateToken()[:12]), e)
		s.back(w, r, "/approvals", fmt.Sprintf("Your decision did NOT decide step %d of %s/%s: the step is not held any more (its record is gone); nothing sent.", step, agent, turn))
		return
	}
	if err != nil {
		s.back(w, r, "/approvals", fmt.Sprintf("Step %d of %s/%s could not be read (%v): nothing sent.", step, agent, turn, err))
		return
	}
	if h.State != "pending" {
		// An answer too late is an answer: kept, with what decided.
		e := auditEntry{Kind: "decision", By: sessionOf(r).name, At: time.Now().UTC(), AgentID: agent, TurnID: turn, Step: step, Outcome: "lost"}
		e, _ = s.outcome(ctx, e)
		e.Outcome = "lost"
		if e.DecidedBy == "" {
			e.DecidedBy = "an earlier answer"
		}
		s.audit(ctx, fmt.Sprintf("decision.%s.%s.%d.late-%s", agent, turn, step, GenerateToken()[:12]), e)
		s.back(w, r, "/approvals", fmt.Sprintf("Your decision did NOT decide step %d of %s/%s: it was decided already (%s) by %s; nothing sent.", step, agent, turn, h.State, e.DecidedBy))
		return
	}
	if f.Get("shown") != pageDigest(h) {
		s.back(w, r, back, fmt.Sprintf("Step %d of %s/%s changed since your page was drawn (a call was added, removed or changed, or its server asked another question): nothing sent; look at it again and decide.", step, agent, turn))
		return
	}
	var ds []protocol.Decision
	var whole *bool // wholeOnItsPage(h), once an approval needs it
	for i, c := range h.Calls {
		if c.Valid == nil || c.Approval == "" {
			continue
		}
		// The form names calls by their index in the record and repeats
		// the call id and the digest of what it showed, so that a page
		// older than the record decides nothing by mistake.
		idx := strconv.Itoa(i)
		digest := h.digest(c)
		if f.Get("call."+idx) != c.CallID || f.Get("digest."+idx) != digest {
			s.back(w, r, back, fmt.Sprintf("The page did not match step %d of %s/%s (call %q is not what the page showed): nothing sent; look at it again and decide.", step, agent, turn, c.CallID))
			return
		}
		reason := strings.TrimSpace(f.Get("reason." + idx))
		switch f.Get("decision." + idx) {
		case "approve":
			if whole == nil {
				w := wholeOnItsPage(h, s.bounds.step)
				whole = &w
			}
			if !*whole {
				s.back(w, r, back, fmt.Sprintf("Step %d of %s/%s weighs more than one page shows whole (%d bytes of page): no page showed all of what would run, so none of its calls may be approved here; reject it, and have the agent send smaller calls. Nothing sent.", step, agent, turn, s.bounds.step))
				return
			}
			d := protocol.Decision{CallID: c.CallID, Approved: true, Reason: reason, Digest: digest}
			if c.Input != nil {
				in, err := buildInput(inputFields(c.Input.Request.RequestedSchema), f, "input."+idx+".")
				if err != nil {
					s.back(w, r, back, fmt.Sprintf("The answer to call %q of step %d of %s/%s: %v. Nothing sent.", c.CallID, step, agent, turn, err))
					return
				}
				d.Input, d.Reason = in, ""
			}
			ds = append(ds, d)
		case "reject":
			if reason == "" {
				reason = "refused by " + sessionOf(r).name
			}
			ds = append(ds, protocol.Decision{CallID: c.CallID, Reason: reason, Digest: digest})
		default:
			s.back(w, r, back, fmt.Sprintf("Decide every held call of step %d of %s/%s (call %q has no decision): nothing sent.", step, agent, turn, c.CallID))
			return
		}
	}
	if len(ds) == 0 {
		s.back(w, r, back, "That step holds no call: nothing sent.")
		return
	}
	se := sessionOf(r)
	e, err := s.send(ctx, se.name, h, ds)
	if err != nil {
		s.back(w, r, back, "The decision was not sent: "+err.Error())
		return
	}
	s.log.Info("console: decision sent", "operator", se.name, "agent_id", agent, "turn_id", turn, "step", step, "msg_id", e.MsgID, "outcome", e.Outcome)
	var msg string
	switch e.Outcome {
	case "decided":
		msg = fmt.Sprintf("Your decision decided step %d of %s/%s (answer %s).", step, agent, turn, e.MsgID)
	case "lost":
		msg = fmt.Sprintf("Your decision did NOT decide step %d of %s/%s: %s decided it first, and that is what runs. Your answer (%s) was ignored.", step, agent, turn, e.DecidedBy, e.MsgID)
	default:
		msg = fmt.Sprintf("Your decision for step %d of %s/%s was sent as %s, but no worker has taken it yet: whether it decided the step shows under Recent decisions.", step, agent, turn, e.MsgID)
	}
	s.back(w, r, "/approvals", msg)
}

// answerAttempts bounds the answer numbers one decision tries.
const answerAttempts = 8

// send publishes the answer under a number of its own and reports what
// became of it.
func (s *Server) send(ctx context.Context, by string, h *heldStep, ds []protocol.Decision) (auditEntry, error) {
	agent, turn, step := h.AgentID, h.TurnID, h.Step
	kv, err := s.auditKV(ctx)
	if err != nil {
		return auditEntry{}, fmt.Errorf("the audit bucket: %w", err)
	}
	// n starts one past every answer seen (sent from here, or
	// dead-lettered from any gateway); a number another console took
	// meanwhile fails the create-only write, a message id a gateway
	// took is reported duplicate by the stream: both move on to the next.
	n := s.answersSent(ctx, agent, turn, step)
	for _, d := range s.refusedAnswers(ctx, []*heldStep{h})[stepRef{agent, turn, step}] {
		n = max(n, d.n)
	}
	body, err := json.Marshal(protocol.Approval{AgentID: agent, TurnID: turn, Step: step, Decisions: ds})
	if err != nil {
		return auditEntry{}, err
	}
	for range answerAttempts {
		n++
		key := fmt.Sprintf("decision.%s.%s.%d.%d", agent, turn, step, n)
		e := auditEntry{Kind: "decision", By: by, At: time.Now().UTC(), AgentID: agent, TurnID: turn, Step: step,
			MsgID: approvalMsgID(agent, turn, step, n), Decisions: ds, Outcome: "sending"}
		b, _ := json.Marshal(e)
		rev, err := kv.Create(ctx, key, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue
		}
		if err != nil {
			return e, fmt.Errorf("keeping the audit record: %w", err)
		}
		m := nats.NewMsg(protocol.Subject(protocol.PrefixApproval, agent, turn))
		m.Data = body
		m.Header.Set(jetstream.MsgIDHeader, e.MsgID)
		ack, err := s.js.PublishMsg(ctx, m)
		switch {
		case err != nil:
			e.Outcome = "failed"
			s.updateAudit(ctx, kv, key, rev, e)
			return e, err
		case ack.Duplicate:
			e.Outcome = "duplicate"
			s.updateAudit(ctx, kv, key, rev, e)
			continue
		}
		e.Seq, e.Outcome = ack.Sequence, "sent"
		rev = s.updateAudit(ctx, kv, key, rev, e)
		e = s.readBack(ctx, e)
		if e.Outcome == "sent" {
			go s.guard("settling a decision", func() { s.settle(kv, key, rev, e, h.ExpiresAt) }, "key", key)
			return e, nil
		}
		s.updateAudit(ctx, kv, key, rev, e)
		return e, nil
	}
	return auditEntry{}, fmt.Errorf("%d answer numbers for step %d were all taken", answerAttempts, step)
}

// settleGrace is how long past a step's deadline an answer's outcome is
// waited for; settleMax bounds the wait, settleEvery paces it.
const (
	settleGrace = time.Minute
	settleMax   = time.Hour
	settleEvery = 500 * time.Millisecond
)

// settle waits, after the page's own wait, for a worker to decide e's
// step, and keeps in e's audit record whether e decided it: a worker
// slower than readBack (a loaded host, a backlog of answers) leaves no
// answer "sent" in the audit when one of them decided. Until then, and
// when it passes settleMax, the list of recent decisions reads the
// outcome from the step's record as it shows it (recentAudit).
func (s *Server) settle(kv jetstream.KeyValue, key string, rev uint64, e auditEntry, expires time.Time) {
	until := expires.Add(settleGrace)
	if limit := time.Now().Add(settleMax); limit.Before(until) {
		until = limit
	}
	ctx, cancel := context.WithDeadline(context.Background(), until)
	defer cancel()
	for {
		if out, ok := s.outcome(ctx, e); ok {
			s.updateAudit(ctx, kv, key, rev, out)
			return
		}
		if s.cfg.NC.IsClosed() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(settleEvery):
		}
	}
}

// readBack waits (s.readBackWait at most) for a worker to decide the
// step, and says whether e's answer is the one that decided it.
func (s *Server) readBack(ctx context.Context, e auditEntry) auditEntry {
	ctx, cancel := context.WithTimeout(ctx, s.readBackWait)
	defer cancel()
	for {
		if out, ok := s.outcome(ctx, e); ok {
			return out
		}
		select {
		case <-ctx.Done():
			return e
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// outcome is e's outcome from the step's record, when a worker decided
// the step; ok is false while it is pending (or its record is gone).
func (s *Server) outcome(ctx context.Context, e auditEntry) (auditEntry, bool) {
	h, err := s.heldStep(ctx, e.AgentID, e.TurnID, e.Step)
	if err != nil || h.State == "pending" || h.Resolution == nil {
		return e, false
	}
	if h.Resolution.By == "answer" && h.Resolution.Seq == e.Seq {
		e.Outcome = "decided"
		return e, true
	}
	e.Outcome = "lost"
	switch h.Resolution.By {
	case "timeout":
		e.DecidedBy = "the approval timeout"
	case "cancel":
		e.DecidedBy = "the turn's cancel"
	default:
		e.DecidedBy = fmt.Sprintf("another answer (TURN_APPROVALS sequence %d, not from this console)", h.Resolution.Seq)
		if o := s.answerBySeq(ctx, e, h.Resolution.Seq); o != nil {
			e.DecidedBy = fmt.Sprintf("%s's answer %s (%s)", o.By, o.MsgID, summarize(o.Decisions))
		}
	}
	return e, true
}

// answerBySeq finds the console's answer to e's step that has sequence
// seq: a while, since its sender writes the sequence into its audit
// record only once the stream acknowledged it, which may come after a
// worker decided with it.
func (s *Server) answerBySeq(ctx context.Context, e auditEntry, seq uint64) *auditEntry {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for {
		if o := s.findAnswer(ctx, e, seq); o != nil {
			return o
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) findAnswer(ctx context.Context, e auditEntry, seq uint64) *auditEntry {
	kv, err := s.auditKV(ctx)
	if err != nil {
		return nil
	}
	l, err := kv.ListKeysFiltered(ctx, fmt.Sprintf("decision.%s.%s.%d.*", e.AgentID, e.TurnID, e.Step))
	if err != nil {
		return nil
	}
	for k := range l.Keys() {
		v, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var o auditEntry
		if json.Unmarshal(v.Value(), &o) == nil && o.Seq == seq {
			return &o
		}
	}
	return nil
}

// summarize says what an answer decided, each call id quoted: an id is
// the model's, any printable text ("c1 approved, c2"), and unquoted it
// would read as part of the sentence around it.
func summarize(ds []protocol.Decision) string {
	var parts []string
	for _, d := range ds {
		if d.Approved {
			parts = append(parts, strconv.Quote(d.CallID)+" approved")
		} else {
			parts = append(parts, strconv.Quote(d.CallID)+" rejected")
		}
	}
	return strings.Join(parts, ", ")
}

func (s *Server) updateAudit(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64, e auditEntry) uint64 {
	b, _ := json.Marshal(e)
	next, err := kv.Update(context.WithoutCancel(ctx), key, b, rev)
	if err != nil {
		s.log.Error("console: the audit record was not updated", "key", key, "err", err, "by", e.By, "outcome", e.Outcome)
		return rev
	}
	return next
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
			if a.Kind == "decision" && a.Outcome == "sent" && a.Seq > 0 {
				// Not decided when it was sent: what became of it now.
				if o, ok := s.outcome(ctx, a); ok {
					a = o
				}
			}
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

// refusedWindow bounds how far back in TURN_DEAD the refused answers of
// the shown steps are looked for, refusedBytes the dead letters' headers
// read for them, newest first, at most refusedChunk sequences at a time.
const (
	refusedWindow = 10_000
	refusedBytes  = 4 << 20
	refusedChunk  = 1_000
)

// refusedAnswers are the answers the workers dead-lettered for steps, by
// step: the headers (never the payloads) of the dead letters on the
// steps' turns (turn.dead.<agent>.<turn>) among the last refusedWindow
// of TURN_DEAD whose Dead-Subject is an answer's. The step is the one
// the answer's message id names (<agent>.<turn>.<step>.approval[.<n>]).
func (s *Server) refusedAnswers(ctx context.Context, steps []*heldStep) map[stepRef][]refusedAnswer {
	out := map[stepRef][]refusedAnswer{}
	var filters []string
	seen := map[string]bool{}
	for _, h := range steps {
		f := protocol.Subject(protocol.PrefixDead, h.AgentID, h.TurnID)
		if !seen[f] {
			seen[f] = true
			filters = append(filters, f)
		}
	}
	if len(filters) == 0 {
		return out
	}
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return out
	}
	info := st.CachedInfo().State
	last := info.LastSeq
	start := uint64(1)
	if last > refusedWindow {
		start = last - refusedWindow
	}
	// Newest first, a window of sequences at a time, until refusedBytes
	// of headers are read: a malformed step carries up to 64 KiB of
	// headers into its dead letter, and 10,000 of them on a shown turn
	// would be 640 MB read for one page. What an earlier load read is
	// not read again (readRefused).
	letters := s.readRefused(ctx, filters, start, last, info.NumDeleted)
	for _, d := range letters {
		if !isAnswer(d) {
			continue
		}
		id := d.Headers.Get(protocol.HeaderDeadPrefix + jetstream.MsgIDHeader)
		head, tail, ok := strings.Cut(id, ".approval")
		p := strings.Split(head, ".")
		if !ok || len(p) != 3 {
			continue
		}
		step, err := strconv.ParseInt(p[2], 10, 64)
		if err != nil {
			continue
		}
		n := 1
		if v, err := strconv.Atoi(strings.TrimPrefix(tail, ".")); err == nil {
			n = v
		}
		ref := stepRef{p[0], p[1], step}
		out[ref] = append(out[ref], refusedAnswer{reason: textclip.Ellipsis(d.Headers.Get(protocol.HeaderDeadReason), maxHeaderShown), n: n})
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
