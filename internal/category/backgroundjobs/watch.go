package backgroundjobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/repull"
	"github.com/agentbull/toolruntime/protocol"
)

// Watch applies the job runner's reports to the job records until ctx
// ends, then stops taking reports, hands back (naks) those it holds and
// returns nil. Every worker runs it beside worker.Run (same context,
// same errgroup); the reports are shared out among the workers by the
// durable consumer job-reports. An error means it could not start, or
// its pull ended by itself (the consumer deleted, the connection
// closed), as the worker's own intakes say.
//
// A pull that nats.go strands with reports stored (package repull) is
// replaced by a new one: its missed heartbeats (2 × 15 s) would apply
// them half a minute late.
//
// A report that can never apply (not JSON, a bad status, an unknown job)
// is terminated and logged; one that fails to apply for a passing reason
// (a storage error) is delivered again after a second.
func (s *Service) Watch(ctx context.Context) error {
	c, err := s.js.Consumer(ctx, Stream, ConsumerReports)
	if err != nil {
		return fmt.Errorf("job reports: %w", err)
	}
	// A stop waits for the report being applied at most one AckWait:
	// past it the report is delivered again anyway.
	keep := &repull.Keeper{Consumer: c, Name: Stream + " > " + ConsumerReports, Logger: s.log, Linger: s.cfg.AckWait}
	err = keep.Run(ctx, func() (repull.Pull, error) {
		return c.Consume(func(m jetstream.Msg) {
			keep.Taking()
			s.handle(ctx, m)
			keep.Took()
		}, jetstream.PullMaxMessages(64),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				s.log.Warn("job reports: consuming", "err", err)
			}))
	})
	if err != nil {
		return fmt.Errorf("job reports: %w", err)
	}
	return nil
}

// handle applies one report message and acknowledges it.
func (s *Service) handle(ctx context.Context, m jetstream.Msg) {
	agentID, jobID, job, err := s.Apply(ctx, m.Subject(), m.Data())
	log := s.log.With("subject", m.Subject())
	var bad *BadReportError
	switch {
	case errors.As(err, &bad):
		log.Warn("job report terminated", "reason", bad.Reason)
		_ = m.TermWithReason(bad.Reason)
	case err != nil:
		if ctx.Err() != nil {
			_ = m.Nak() // stopping: another worker takes it
			return
		}
		log.Warn("job report not applied; it will be delivered again", "err", err)
		_ = m.NakWithDelay(time.Second)
	default:
		log.Debug("job report applied", "agent_id", agentID, "job_id", jobID, "status", job.Status)
		_ = m.Ack()
	}
}

// BadReportError is a report that can never be applied.
type BadReportError struct{ Reason string }

func (e *BadReportError) Error() string { return "bad job report: " + e.Reason }

// Apply applies a report that arrived on subject to its job record and
// returns the record as it now is. A report that changes nothing (the
// job has ended, or the report is stale) is not an error. Errors that
// mean the report can never apply are *BadReportError.
func (s *Service) Apply(ctx context.Context, subject string, data []byte) (agentID, jobID string, job *Job, err error) {
	tokens := strings.Split(subject, ".")
	if len(tokens) != 4 || tokens[0]+"."+tokens[1] != PrefixReport || !protocol.ValidID(tokens[2]) || !protocol.ValidID(tokens[3]) {
		return "", "", nil, &BadReportError{Reason: fmt.Sprintf("subject %q is not %s.<agent_id>.<job_id>", subject, PrefixReport)}
	}
	agentID, jobID = tokens[2], tokens[3]
	var r protocol.JobReport
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return agentID, jobID, nil, &BadReportError{Reason: fmt.Sprintf("not a report: %v", err)}
	}
	if err := checkReport(&r); err != nil {
		return agentID, jobID, nil, &BadReportError{Reason: err.Error()}
	}
	var ignored string
	job, err = s.update(ctx, agentID, jobID, func(j *Job) bool {
		var changed bool
		changed, ignored = j.apply(&r, time.Now().UTC(), s.cfg.MaxResultBytes)
		return changed
	})
	if errors.Is(err, ErrNotFound) {
		return agentID, jobID, nil, &BadReportError{Reason: fmt.Sprintf("agent %s has no job %s", agentID, jobID)}
	}
	if err != nil {
		return agentID, jobID, nil, err
	}
	if ignored != "" {
		s.log.Info("job report ignored", "agent_id", agentID, "job_id", jobID, "status", r.Status, "seq", r.Seq, "why", ignored)
	}
	return agentID, jobID, job, nil
}
