package backgroundjobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
const Binding = "background_jobs"

// Names of the bucket, stream, consumer, subject prefixes and tools.
const (
	Bucket          = protocol.BucketJobs
	Stream          = protocol.StreamJobs
	ConsumerReports = protocol.ConsumerJobReports
	PrefixStart     = protocol.PrefixJobStart
	PrefixCancel    = protocol.PrefixJobCancel
	PrefixReport    = protocol.PrefixJobReport

	StartName  = "start_job"
	ShowName   = "show_job"
	ListName   = "list_jobs"
	CancelName = "cancel_job"
)

// Defaults of a zero Config.
const (
	DefaultRecordTTL      = 30 * 24 * time.Hour
	DefaultEventsMaxAge   = 7 * 24 * time.Hour
	DefaultMaxOpen        = 10
	DefaultMaxResultBytes = 64 << 10
	DefaultAckWait        = 30 * time.Second
	// maxCAS bounds the read-modify-write attempts of one update.
	maxCAS = 16
)

// Config configures the category. The zero value of each field works.
type Config struct {
	// Replicas and Storage of the JOBS bucket, the JOB_EVENTS stream and
	// the job-reports consumer (1, file).
	Replicas int
	Storage  jetstream.StorageType
	// RecordTTL is how long a job record is kept after its last change
	// (30 d).
	RecordTTL time.Duration
	// EventsMaxAge is how long JOB_EVENTS keeps announcements, cancels and
	// reports (7 d).
	EventsMaxAge time.Duration
	// MaxOpen bounds the queued and running jobs of one agent (10).
	MaxOpen int
	// MaxResultBytes bounds a stored result (64 KiB); longer ones are
	// clipped.
	MaxResultBytes int
	// AckWait of the job-reports consumer (30 s).
	AckWait time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service is the background job category. It is safe for concurrent use;
// every worker of a fleet has its own over one bucket and stream.
type Service struct {
	cfg Config
	js  jetstream.JetStream
	// kv is JOBS under retry, which makes every request to the bucket
	// and the stream: a short attempt timeout, not the call's, and
	// transient failures tried again.
	kv    jetstream.KeyValue
	retry bus.Retry
	log   *slog.Logger
	tools []*tool.Tool
}

// New creates or updates the JOBS bucket, the JOB_EVENTS stream and its
// job-reports consumer, and builds the tools.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Service, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.RecordTTL == 0 {
		cfg.RecordTTL = DefaultRecordTTL
	}
	if cfg.EventsMaxAge == 0 {
		cfg.EventsMaxAge = DefaultEventsMaxAge
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = DefaultMaxOpen
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "Background agent jobs", History: 1, TTL: cfg.RecordTTL,
		Replicas: cfg.Replicas, Storage: cfg.Storage,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", Bucket, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        Stream,
		Description: "Background jobs: job.start and job.cancel for the job runner, job.report from it",
		Subjects:    []string{PrefixStart + ".*.*", PrefixCancel + ".*.*", PrefixReport + ".*.*"},
		Retention:   jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, MaxAge: cfg.EventsMaxAge,
		Storage: cfg.Storage, Replicas: cfg.Replicas, Duplicates: 2 * time.Minute,
	}); err != nil {
		return nil, fmt.Errorf("stream %s: %w", Stream, err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable: ConsumerReports, Description: "Job reports, applied to JOBS by the workers",
		FilterSubject: PrefixReport + ".*.*", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait: cfg.AckWait, MaxDeliver: 10, Replicas: cfg.Replicas, MemoryStorage: cfg.Storage == jetstream.MemoryStorage,
	}); err != nil {
		return nil, fmt.Errorf("consumer %s > %s: %w", Stream, ConsumerReports, err)
	}
	r := bus.Retry{Logger: cfg.Logger}
	s := &Service{cfg: cfg, js: js, kv: r.KV(js, kv), retry: r, log: cfg.Logger}
	s.tools = s.build()
	return s, nil
}

// Category returns the category: the four tools in main turns that bind
// "background_jobs", nothing otherwise.
func (s *Service) Category() tool.Category {
	return tool.NewCategory(Binding, s.tools...)
}

// Subject is a job event subject: prefix.<agent_id>.<job_id>.
func Subject(prefix, agentID, jobID string) string { return prefix + "." + agentID + "." + jobID }

// StartParams are start_job's parameters.
type StartParams struct {
	Title        string `json:"title" jsonschema:"description=A short title\\, shown in lists.,minLength=1,maxLength=200"`
	Instructions string `json:"instructions" jsonschema:"description=Everything the background agent needs to do the job: it sees nothing of this conversation.,minLength=1,maxLength=32000"`
}

// ShowParams are show_job's parameters.
type ShowParams struct {
	JobID string `json:"job_id" jsonschema:"description=The job's id\\, as start_job or list_jobs gave it.,pattern=^[A-Za-z0-9_-]{1\\,64}$"`
}

// ListParams are list_jobs' parameters.
type ListParams struct {
	Status string `json:"status,omitempty" jsonschema:"description=Only jobs with this status.,enum=queued,enum=running,enum=succeeded,enum=failed,enum=cancelled"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=How many to list\\, newest first (default 20).,minimum=1,maximum=100"`
}

// CancelParams are cancel_job's parameters.
type CancelParams struct {
	JobID  string `json:"job_id" jsonschema:"description=The job to cancel.,pattern=^[A-Za-z0-9_-]{1\\,64}$"`
	Reason string `json:"reason,omitempty" jsonschema:"description=Why; recorded and passed to the job runner.,maxLength=500"`
}

func (s *Service) build() []*tool.Tool {
	return []*tool.Tool{
		tool.Must(tool.Def[StartParams]{
			Spec: tool.Spec{Name: StartName, ExecutionMode: tool.Sequential,
				Description: "Start a background job: another agent works on the instructions while this conversation goes on. " +
					"Returns the job id at once; show_job reports its progress and result."},
			Activity: func(p StartParams) string { return "Starting job " + textclip.Runes(p.Title, 60) },
			Execute:  s.start,
		}),
		tool.Must(tool.Def[ShowParams]{
			Spec:     tool.Spec{Name: ShowName, ReadOnly: true, Description: "Show a background job: its status, progress, and result or error."},
			Activity: func(p ShowParams) string { return "Reading job " + p.JobID },
			Execute:  s.show,
		}),
		tool.Must(tool.Def[ListParams]{
			Spec:     tool.Spec{Name: ListName, ReadOnly: true, Description: "List your background jobs, newest first, with their status and progress."},
			Activity: func(ListParams) string { return "Listing jobs" },
			Execute:  s.list,
		}),
		tool.Must(tool.Def[CancelParams]{
			Spec: tool.Spec{Name: CancelName, Destructive: true, ExecutionMode: tool.Sequential,
				Description: "Cancel a background job that has not ended: the job runner is told to stop, and nothing it reports afterwards is kept."},
			Activity: func(p CancelParams) string { return "Cancelling job " + p.JobID },
			Execute:  s.cancel,
		}),
	}
}

func (s *Service) start(ctx context.Context, p StartParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if strings.TrimSpace(p.Instructions) == "" || strings.TrimSpace(p.Title) == "" {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Nothing was started: the title and the instructions must not be blank.")
	}
	all, err := s.Jobs(ctx, call.AgentID)
	if err != nil {
		return tool.Result{}, err
	}
	open := 0
	for _, j := range all {
		if !Final(j.Status) {
			open++
		}
	}
	if open >= s.cfg.MaxOpen {
		return tool.Result{}, tool.Errorf(tool.ToolError, "You have %d jobs that have not ended, the most allowed; wait for one or cancel one (list_jobs shows them).", open)
	}
	now := time.Now().UTC()
	j := &Job{
		JobID: newJobID(now), AgentID: call.AgentID, Title: strings.TrimSpace(p.Title), Instructions: p.Instructions, Status: StatusQueued,
		CreatedBy: call.Ref(), CreatedAt: now, UpdatedAt: now,
	}
	data, err := json.Marshal(j)
	if err != nil {
		return tool.Result{}, err
	}
	if _, err := s.kv.Create(ctx, Key(j.AgentID, j.JobID), data); err != nil {
		return tool.Result{}, fmt.Errorf("the job could not be stored, so it was not started: %w", err)
	}
	ev := protocol.JobEvent{Type: protocol.EventJobStart, JobID: j.JobID, AgentID: j.AgentID, TurnID: call.TurnID, Title: j.Title, Instructions: j.Instructions, Time: now}
	if err := s.publish(ctx, Subject(PrefixStart, j.AgentID, j.JobID), j.JobID+".start", ev); err != nil {
		// Nobody will run it: say so in the record rather than leave it
		// queued forever.
		_, _ = s.update(context.WithoutCancel(ctx), j.AgentID, j.JobID, func(j *Job) bool {
			return j.Status == StatusQueued && s.end(j, StatusFailed, "the job could not be announced to the job runner")
		})
		return tool.Result{}, fmt.Errorf("the job could not be announced to the job runner, so it will not run (%w); start it again", err)
	}
	return tool.Result{
		Content: fmt.Sprintf("Started job %s (%q); it runs in the background. show_job %s reports its progress and result.", j.JobID, j.Title, j.JobID),
		Details: j,
	}, nil
}

// end marks a job ended with status and a reason.
func (s *Service) end(j *Job, status, reason string) bool {
	now := time.Now().UTC()
	j.Status, j.UpdatedAt, j.EndedAt = status, now, &now
	switch status {
	case StatusFailed:
		j.Error = reason
	case StatusCancelled:
		j.CancelReason = reason
	}
	return true
}

func (s *Service) publish(ctx context.Context, subject, msgID string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	m := nats.NewMsg(subject)
	m.Data = data
	// The message id makes a publish retried after a lost answer a
	// duplicate.
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	return s.retry.Do(ctx, "publishing "+msgID, func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectStream(Stream))
		return err
	})
}

// ErrNotFound is returned for a job that does not exist (or is another
// agent's).
var ErrNotFound = errors.New("job not found")

// Get reads a job.
func (s *Service) Get(ctx context.Context, agentID, jobID string) (*Job, error) {
	if !protocol.ValidID(jobID) {
		return nil, ErrNotFound
	}
	e, err := s.kv.Get(ctx, Key(agentID, jobID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s: %w", jobID, err)
	}
	return decode(e)
}

func decode(e jetstream.KeyValueEntry) (*Job, error) {
	var j Job
	if err := json.Unmarshal(e.Value(), &j); err != nil {
		return nil, fmt.Errorf("job record %s is unreadable: %w", e.Key(), err)
	}
	j.revision = e.Revision()
	return &j, nil
}

// update is a compare-and-set loop over a job record: change edits the
// record as read and reports whether to write it.
func (s *Service) update(ctx context.Context, agentID, jobID string, change func(*Job) bool) (*Job, error) {
	for attempt := 1; ; attempt++ {
		j, err := s.Get(ctx, agentID, jobID)
		if err != nil {
			return nil, err
		}
		if !change(j) {
			return j, nil
		}
		data, err := json.Marshal(j)
		if err != nil {
			return nil, err
		}
		rev, err := s.kv.Update(ctx, Key(agentID, jobID), data, j.revision)
		if err == nil {
			j.revision = rev
			return j, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt == maxCAS {
			return nil, fmt.Errorf("writing job %s: %w", jobID, err)
		}
		t := time.NewTimer(time.Duration(attempt) * (2*time.Millisecond + rand.N(5*time.Millisecond)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
	}
}

// Jobs reads every job record of an agent, newest first.
func (s *Service) Jobs(ctx context.Context, agentID string) ([]*Job, error) {
	var out []*Job
	err := s.retry.Watch(ctx, "reading jobs", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		out = out[:0] // an attempt reads from the start
		return s.kv.Watch(ctx, "job."+agentID+".*", jetstream.IgnoreDeletes())
	}, func(e jetstream.KeyValueEntry) error {
		j, err := decode(e)
		if err != nil {
			s.log.Warn("skipping an unreadable job record", "key", e.Key(), "err", err)
			return nil
		}
		out = append(out, j)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].JobID > out[k].JobID })
	return out, nil
}

func (s *Service) show(ctx context.Context, p ShowParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	j, err := s.Get(ctx, call.AgentID, p.JobID)
	if errors.Is(err, ErrNotFound) {
		return tool.Result{}, tool.Errorf(tool.ToolError, "You have no job %s; list_jobs shows yours.", p.JobID)
	}
	if err != nil {
		return tool.Result{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s %q: %s", j.JobID, j.Title, statusLine(j))
	fmt.Fprintf(&b, "\nStarted %s", j.CreatedAt.Format(time.RFC3339))
	if j.EndedAt != nil {
		fmt.Fprintf(&b, ", ended %s", j.EndedAt.Format(time.RFC3339))
	} else {
		fmt.Fprintf(&b, ", last update %s", j.UpdatedAt.Format(time.RFC3339))
	}
	b.WriteString(".")
	switch j.Status {
	case StatusSucceeded:
		fmt.Fprintf(&b, "\nResult:\n%s", j.Result)
	case StatusFailed:
		fmt.Fprintf(&b, "\nError: %s", j.Error)
	case StatusCancelled:
		fmt.Fprintf(&b, "\nCancelled: %s", j.CancelReason)
	}
	return tool.Result{Content: b.String(), Details: j}, nil
}

// statusLine is a job's status with its progress.
func statusLine(j *Job) string {
	s := j.Status
	if p := j.Progress; p != nil && !Final(j.Status) {
		if p.Percent != nil {
			s += fmt.Sprintf(", %.0f%%", *p.Percent)
		}
		if p.Message != "" {
			s += ": " + p.Message
		}
	}
	return s
}

func (s *Service) list(ctx context.Context, p ListParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if p.Limit == 0 {
		p.Limit = 20
	}
	all, err := s.Jobs(ctx, call.AgentID)
	if err != nil {
		return tool.Result{}, err
	}
	var jobs []*Job
	for _, j := range all {
		if p.Status == "" || j.Status == p.Status {
			jobs = append(jobs, j)
		}
	}
	matched := len(jobs)
	if len(jobs) > p.Limit {
		jobs = jobs[:p.Limit]
	}
	if matched == 0 {
		if p.Status != "" {
			return tool.Result{Content: fmt.Sprintf("You have no %s jobs.", p.Status), Details: jobs}, nil
		}
		return tool.Result{Content: "You have no jobs.", Details: jobs}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d job%s, newest first:", len(jobs), matched, tools.Plural(matched))
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n- %s %q: %s (started %s)", j.JobID, j.Title, statusLine(j), j.CreatedAt.Format(time.RFC3339))
	}
	return tool.Result{Content: b.String(), Details: jobs}, nil
}

func (s *Service) cancel(ctx context.Context, p CancelParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	reason := strings.TrimSpace(p.Reason)
	if reason == "" {
		reason = "cancelled by the agent"
	}
	var ended string
	j, err := s.update(ctx, call.AgentID, p.JobID, func(j *Job) bool {
		ended = j.Status
		if Final(j.Status) {
			return false
		}
		return s.end(j, StatusCancelled, reason)
	})
	if errors.Is(err, ErrNotFound) {
		return tool.Result{}, tool.Errorf(tool.ToolError, "You have no job %s; list_jobs shows yours.", p.JobID)
	}
	if err != nil {
		return tool.Result{}, err
	}
	switch ended {
	case StatusSucceeded, StatusFailed:
		return tool.Result{}, tool.Errorf(tool.ToolError, "Job %s already %s; there is nothing to cancel.", j.JobID, ended)
	}
	// Also when it was cancelled already: a cancel cut short before its
	// announcement is finished now (the message id makes a repeat harmless).
	ev := protocol.JobEvent{Type: protocol.EventJobCancel, JobID: j.JobID, AgentID: j.AgentID, Reason: j.CancelReason, Time: *j.EndedAt}
	if err := s.publish(ctx, Subject(PrefixCancel, j.AgentID, j.JobID), j.JobID+".cancel", ev); err != nil {
		return tool.Result{}, fmt.Errorf("job %s is marked cancelled but the job runner could not be told (%w); call cancel_job again", j.JobID, err)
	}
	msg := fmt.Sprintf("Cancelled job %s (%q); the job runner was told to stop, and nothing it reports from now on is kept.", j.JobID, j.Title)
	if ended == StatusCancelled {
		msg = fmt.Sprintf("Job %s (%q) was already cancelled (%s); the job runner has been told.", j.JobID, j.Title, j.CancelReason)
	}
	return tool.Result{Content: msg, Details: j}, nil
}
