package schedules

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Binding is the context binding that enables the category.
const Binding = "schedules"

// Names of the tools.
const (
	CreateName = "create_schedule"
	ListName   = "list_schedules"
	DeleteName = "delete_schedule"
)

// Header names of JetStream message scheduling (nats-server 2.12 and
// later). The scheduler strips them from a fired message and adds
// protocol.HeaderScheduler and protocol.HeaderScheduleNext.
const (
	HeaderSchedule    = "Nats-Schedule"
	HeaderTarget      = "Nats-Schedule-Target"
	HeaderTimeZone    = "Nats-Schedule-Time-Zone"
	HeaderScheduleTTL = "Nats-Schedule-TTL"
)

// Defaults of a zero Config.
const (
	DefaultMinInterval = time.Minute
	DefaultMaxPerAgent = 100
	DefaultFireTTL     = 7 * 24 * time.Hour
)

// Config configures the category. The zero value of each field works.
type Config struct {
	// Replicas and Storage of the SCHEDULES stream (1, file).
	Replicas int
	Storage  jetstream.StorageType
	// MinInterval is the shortest interval a schedule may fire at (1 m;
	// never below the server's 1 s).
	MinInterval time.Duration
	// MaxPerAgent bounds the schedules of one agent (100).
	MaxPerAgent int
	// FireTTL is how long a fired message is kept for the gateway (7 d).
	FireTTL time.Duration
}

// Service is the schedules category over the SCHEDULES stream. It is safe
// for concurrent use.
type Service struct {
	cfg    Config
	js     jetstream.JetStream
	stream jetstream.Stream
	// retry makes every request to the stream: a short attempt timeout,
	// not the call's, and transient failures tried again.
	retry bus.Retry
	tools []*tool.Tool
}

// StreamConfig is the SCHEDULES stream: schedule definitions and the
// messages they fire, in one stream because the server only fires into
// subjects of the schedule's own stream.
func StreamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        protocol.StreamSchedules,
		Description: "Agent schedules (schedule.def.*.*) and the messages they fire (schedule.fire.*.*)",
		Subjects:    []string{protocol.PrefixScheduleDef + ".*.*", protocol.PrefixScheduleFire + ".*.*"},
		Retention:   jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		Storage: cfg.Storage, Replicas: max(cfg.Replicas, 1),
		AllowMsgSchedules: true, AllowMsgTTL: true, AllowRollup: true, AllowDirect: true,
		Duplicates: 2 * time.Minute,
	}
}

// New creates or updates the SCHEDULES stream and builds the tools.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Service, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	cfg.MinInterval = max(cfg.MinInterval, ServerMinInterval)
	if cfg.MaxPerAgent <= 0 {
		cfg.MaxPerAgent = DefaultMaxPerAgent
	}
	if cfg.FireTTL == 0 {
		cfg.FireTTL = DefaultFireTTL
	}
	if cfg.FireTTL < time.Second {
		return nil, fmt.Errorf("schedule fire TTL must be at least 1s, not %s", cfg.FireTTL)
	}
	st, err := js.CreateOrUpdateStream(ctx, StreamConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("stream %s (message scheduling needs nats-server 2.12 or later): %w", protocol.StreamSchedules, err)
	}
	if !st.CachedInfo().Config.AllowMsgSchedules {
		return nil, fmt.Errorf("stream %s: the server did not enable message scheduling (it needs nats-server 2.12 or later)", protocol.StreamSchedules)
	}
	s := &Service{cfg: cfg, js: js, stream: st}
	s.tools = s.build()
	return s, nil
}

// Category returns the category: the three tools in main turns that
// bind "schedules", nothing otherwise.
func (s *Service) Category() tool.Category {
	return tool.NewCategory(Binding, s.tools...)
}

// DefSubject is the subject a schedule's definition lives on.
func DefSubject(agentID, scheduleID string) string {
	return protocol.PrefixScheduleDef + "." + agentID + "." + scheduleID
}

// FireSubject is the subject a schedule fires on.
func FireSubject(agentID, scheduleID string) string {
	return protocol.PrefixScheduleFire + "." + agentID + "." + scheduleID
}

// CreateParams are create_schedule's parameters.
type CreateParams struct {
	Name         string `json:"name,omitempty" jsonschema:"description=A short name\\, shown in lists.,maxLength=100"`
	Instructions string `json:"instructions" jsonschema:"description=What to do each time it fires: the start of a new turn\\, which sees nothing of this conversation\\, so say everything needed.,minLength=1,maxLength=8000"`
	At           string `json:"at,omitempty" jsonschema:"description=Fire once at this time (RFC 3339\\, e.g. 2026-05-01T09:00:00+02:00; without an offset give time_zone)."`
	Every        string `json:"every,omitempty" jsonschema:"description=Fire repeatedly at this interval\\, e.g. 15m\\, 2h\\, 24h. The first run is one interval from now."`
	Cron         string `json:"cron,omitempty" jsonschema:"description=Fire on a cron schedule with six fields: second minute hour day-of-month month day-of-week\\, e.g. '0 0 9 * * mon-fri'; or @hourly\\, @daily\\, @weekly\\, @monthly\\, @yearly."`
	TimeZone     string `json:"time_zone,omitempty" jsonschema:"description=IANA time zone for cron (and for an at time without an offset)\\, e.g. Europe/Paris. Default UTC."`
}

// ListParams are list_schedules' parameters: none.
type ListParams struct{}

// DeleteParams are delete_schedule's parameters.
type DeleteParams struct {
	ScheduleID string `json:"schedule_id" jsonschema:"description=The schedule's id\\, as create_schedule or list_schedules gave it.,pattern=^[A-Za-z0-9_-]{1\\,64}$"`
}

func (s *Service) build() []*tool.Tool {
	return []*tool.Tool{
		tool.Must(tool.Def[CreateParams]{
			Spec: tool.Spec{Name: CreateName, ExecutionMode: tool.Sequential,
				Description: fmt.Sprintf("Schedule yourself to act later: once at a time (at), repeatedly at an interval (every), or on a cron schedule (cron, "+
					"with time_zone). Each time it fires, a new turn starts with the instructions. Give exactly one of at, every and cron; "+
					"runs are at least %s apart.", s.cfg.MinInterval)},
			Activity: func(p CreateParams) string { return "Scheduling " + describeSpec(p) },
			Execute:  s.create,
		}),
		tool.Must(tool.Def[ListParams]{
			Spec:     tool.Spec{Name: ListName, ReadOnly: true, Description: "List your schedules: when each fires next, when it fired last, and its instructions."},
			Activity: func(ListParams) string { return "Listing schedules" },
			Execute:  s.list,
		}),
		tool.Must(tool.Def[DeleteParams]{
			Spec:     tool.Spec{Name: DeleteName, Destructive: true, ExecutionMode: tool.Sequential, Description: "Delete a schedule so that it never fires again."},
			Activity: func(p DeleteParams) string { return "Deleting schedule " + p.ScheduleID },
			Execute:  s.delete,
		}),
	}
}

func describeSpec(p CreateParams) string {
	switch {
	case p.At != "":
		return "once at " + p.At
	case p.Every != "":
		return "every " + p.Every
	case p.Cron != "" && p.TimeZone != "":
		return "cron " + p.Cron + " (" + p.TimeZone + ")"
	default:
		return "cron " + p.Cron
	}
}

func newScheduleID(now time.Time) string {
	var r [5]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("sch_%012x%s", now.UnixMilli(), hex.EncodeToString(r[:]))
}

func (s *Service) create(ctx context.Context, p CreateParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	now := time.Now().UTC()
	plan, err := Check(Spec{At: p.At, Every: p.Every, Cron: p.Cron, TimeZone: p.TimeZone}, now, s.cfg.MinInterval)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Nothing was scheduled: %v.", err)
	}
	if strings.TrimSpace(p.Instructions) == "" {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Nothing was scheduled: the instructions are empty.")
	}
	ids, err := s.ids(ctx, call.AgentID)
	if err != nil {
		return tool.Result{}, err
	}
	if len(ids) >= s.cfg.MaxPerAgent {
		return tool.Result{}, tool.Errorf(tool.ToolError, "You have %d schedules, the most allowed; delete one first (list_schedules shows them).", len(ids))
	}
	sc := protocol.ScheduleFire{
		ScheduleID: newScheduleID(now), AgentID: call.AgentID, Name: strings.TrimSpace(p.Name), Instructions: p.Instructions,
		Kind: plan.Kind, Expression: plan.Expression, TimeZone: plan.TimeZone,
		CreatedBy: call.Ref(), CreatedAt: now,
	}
	data, err := json.Marshal(sc)
	if err != nil {
		return tool.Result{}, err
	}
	m := nats.NewMsg(DefSubject(sc.AgentID, sc.ScheduleID))
	m.Data = data
	m.Header.Set(HeaderSchedule, plan.Pattern)
	m.Header.Set(HeaderTarget, FireSubject(sc.AgentID, sc.ScheduleID))
	m.Header.Set(HeaderScheduleTTL, s.cfg.FireTTL.String())
	if plan.TimeZone != "" {
		m.Header.Set(HeaderTimeZone, plan.TimeZone)
	}
	// The message id makes a publish retried after a lost answer a
	// duplicate, not a second schedule.
	m.Header.Set(jetstream.MsgIDHeader, sc.ScheduleID)
	err = s.retry.Do(ctx, "storing schedule "+sc.ScheduleID, func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(protocol.StreamSchedules))
		return err
	})
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.Code == 400 {
			// The checks above should have caught it; the server's word.
			return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Nothing was scheduled: the server refused the schedule: %s.", apiErr.Description)
		}
		return tool.Result{}, fmt.Errorf("the schedule could not be stored, so it will not fire: %w", err)
	}
	info := Info{ScheduleFire: sc, NextFire: &plan.First}
	return tool.Result{
		Content: fmt.Sprintf("Created schedule %s (%s); it first fires at %s. Each time, a new turn starts with the instructions.",
			sc.ScheduleID, describe(&sc), plan.First.Format(time.RFC3339)),
		Details: info,
	}, nil
}

// describe says when a schedule fires, in a few words.
func describe(sc *protocol.ScheduleFire) string {
	switch sc.Kind {
	case KindAt:
		return "once at " + sc.Expression
	case KindEvery:
		return "every " + sc.Expression
	}
	zone := sc.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	return fmt.Sprintf("cron %q, %s", sc.Expression, zone)
}

// ids are the schedule ids of an agent, sorted (so by creation time).
func (s *Service) ids(ctx context.Context, agentID string) ([]string, error) {
	var info *jetstream.StreamInfo
	err := s.retry.Do(ctx, "reading the schedules", func(ctx context.Context) (err error) {
		info, err = s.stream.Info(ctx, jetstream.WithSubjectFilter(DefSubject(agentID, "*")))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the schedules: %w", err)
	}
	ids := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		ids = append(ids, subj[strings.LastIndexByte(subj, '.')+1:])
	}
	sort.Strings(ids)
	return ids, nil
}

// Get reads a schedule; jetstream.ErrMsgNotFound when there is none (or
// it was deleted, or it was a one-off that has fired).
func (s *Service) Get(ctx context.Context, agentID, scheduleID string) (*protocol.ScheduleFire, error) {
	m, err := s.last(ctx, DefSubject(agentID, scheduleID))
	if err != nil {
		return nil, err
	}
	var sc protocol.ScheduleFire
	if err := json.Unmarshal(m.Data, &sc); err != nil {
		return nil, fmt.Errorf("schedule %s is unreadable: %w", scheduleID, err)
	}
	return &sc, nil
}

// last reads the last message on subject; jetstream.ErrMsgNotFound when
// there is none.
func (s *Service) last(ctx context.Context, subject string) (m *jetstream.RawStreamMsg, err error) {
	err = s.retry.Do(ctx, "reading "+subject, func(ctx context.Context) (err error) {
		m, err = s.stream.GetLastMsgForSubject(ctx, subject)
		return err
	})
	return m, err
}

// Info is a schedule as list_schedules shows it.
type Info struct {
	protocol.ScheduleFire
	NextFire *time.Time `json:"next_fire,omitempty"`
	LastFire *time.Time `json:"last_fire,omitempty"`
}

// List reads an agent's schedules, oldest first, with their last and
// next fire times.
func (s *Service) List(ctx context.Context, agentID string) ([]Info, error) {
	ids, err := s.ids(ctx, agentID)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(ids))
	now := time.Now().UTC()
	for _, id := range ids {
		sc, err := s.Get(ctx, agentID, id)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted or fired meanwhile
		}
		if err != nil {
			return nil, err
		}
		info := Info{ScheduleFire: *sc}
		var nextHdr string
		if m, err := s.last(ctx, FireSubject(agentID, id)); err == nil {
			t := m.Time.UTC()
			info.LastFire = &t
			nextHdr = m.Header.Get(protocol.HeaderScheduleNext)
		} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, err
		}
		info.NextFire = nextFire(sc, nextHdr, now)
		out = append(out, info)
	}
	return out, nil
}

// nextFire is when a schedule fires next: the server's own word from the
// last fired message when there is one, else computed as it does.
func nextFire(sc *protocol.ScheduleFire, nextHdr string, now time.Time) *time.Time {
	if t, err := time.Parse(time.RFC3339Nano, nextHdr); err == nil && t.After(now.Add(-time.Second)) {
		t = t.UTC()
		return &t
	}
	switch sc.Kind {
	case KindAt:
		if t, err := time.Parse(time.RFC3339, sc.Expression); err == nil {
			return &t
		}
	case KindEvery:
		if d, err := time.ParseDuration(sc.Expression); err == nil && d > 0 {
			t := sc.CreatedAt.Round(time.Second).Add(d)
			if t.Before(now) {
				t = now.Round(time.Second).Add(d)
			}
			return &t
		}
	case KindCron:
		loc := time.UTC
		if sc.TimeZone != "" {
			if l, err := time.LoadLocation(sc.TimeZone); err == nil {
				loc = l
			}
		}
		if c, err := ParseCron(sc.Expression); err == nil {
			if t, ok := c.Next(now, loc); ok {
				t = t.UTC()
				return &t
			}
		}
	}
	return nil
}

func (s *Service) list(ctx context.Context, _ ListParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	infos, err := s.List(ctx, call.AgentID)
	if err != nil {
		return tool.Result{}, err
	}
	if len(infos) == 0 {
		return tool.Result{Content: "You have no schedules.", Details: infos}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d schedule%s:", len(infos), tools.Plural(len(infos)))
	for _, in := range infos {
		fmt.Fprintf(&b, "\n- %s", in.ScheduleID)
		if in.Name != "" {
			fmt.Fprintf(&b, " %q", in.Name)
		}
		fmt.Fprintf(&b, ": %s", describe(&in.ScheduleFire))
		if in.NextFire != nil {
			fmt.Fprintf(&b, "; next %s", in.NextFire.Format(time.RFC3339))
		}
		if in.LastFire != nil {
			fmt.Fprintf(&b, "; last fired %s", in.LastFire.Format(time.RFC3339))
		}
		fmt.Fprintf(&b, "\n  instructions: %s", textclip.Runes(in.Instructions, 200))
	}
	return tool.Result{Content: b.String(), Details: infos}, nil
}

func (s *Service) delete(ctx context.Context, p DeleteParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	sc, err := s.Get(ctx, call.AgentID, p.ScheduleID)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return tool.Result{}, tool.Errorf(tool.ToolError, "You have no schedule %s (a one-off schedule is gone once it has fired); list_schedules shows yours.", p.ScheduleID)
	}
	if err != nil {
		return tool.Result{}, err
	}
	// Purging the definition's subject takes it off the server's
	// scheduler: it never fires again.
	err = s.retry.Do(ctx, "deleting schedule "+p.ScheduleID, func(ctx context.Context) error {
		return s.stream.Purge(ctx, jetstream.WithPurgeSubject(DefSubject(call.AgentID, p.ScheduleID)))
	})
	if err != nil {
		return tool.Result{}, fmt.Errorf("schedule %s could not be deleted: %w", p.ScheduleID, err)
	}
	return tool.Result{Content: fmt.Sprintf("Deleted schedule %s (%s); it will not fire again.", sc.ScheduleID, describe(sc)), Details: sc}, nil
}
