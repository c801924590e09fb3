package backgroundjobs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// Job statuses. Succeeded, failed and cancelled are final.
const (
	StatusQueued    = "queued"
	StatusRunning   = protocol.JobRunning
	StatusSucceeded = protocol.JobSucceeded
	StatusFailed    = protocol.JobFailed
	StatusCancelled = protocol.JobCancelled
)

// Final reports whether a status is an end.
func Final(status string) bool {
	return status == StatusSucceeded || status == StatusFailed || status == StatusCancelled
}

// Job is the value of a job's key in JOBS.
type Job struct {
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id"`
	Title        string `json:"title"`
	Instructions string `json:"instructions"`
	Status       string `json:"status"`
	// Progress is the runner's last progress report.
	Progress *protocol.JobProgress `json:"progress,omitempty"`
	// Result is what the runner reported on success (clipped to the
	// configured size); Error why it failed.
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// CancelReason is cancel_job's reason, or the runner's when it
	// reported cancelled itself.
	CancelReason string `json:"cancel_reason,omitempty"`
	// ReportSeq is the highest report seq applied.
	ReportSeq int64            `json:"report_seq,omitempty"`
	CreatedBy protocol.CallRef `json:"created_by"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	EndedAt   *time.Time       `json:"ended_at,omitempty"`

	revision uint64
}

// checkReport reports what is wrong with a report, if anything.
func checkReport(r *protocol.JobReport) error {
	switch r.Status {
	case StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled:
	default:
		return fmt.Errorf("status %q is not running, succeeded, failed or cancelled", r.Status)
	}
	if r.Seq < 0 {
		return fmt.Errorf("seq %d is negative", r.Seq)
	}
	if p := r.Progress; p != nil && p.Percent != nil && (*p.Percent < 0 || *p.Percent > 100) {
		return fmt.Errorf("progress.percent %v is outside 0-100", *p.Percent)
	}
	return nil
}

// apply changes the job by a report (already checked). It returns false,
// with the reason, when the report changes nothing: the job has ended, or
// the report is stale.
func (j *Job) apply(r *protocol.JobReport, now time.Time, maxResult int) (bool, string) {
	if Final(j.Status) {
		return false, "the job is already " + j.Status
	}
	if r.Seq > 0 && r.Seq <= j.ReportSeq {
		return false, fmt.Sprintf("seq %d is not above %d, the last applied", r.Seq, j.ReportSeq)
	}
	j.ReportSeq = max(j.ReportSeq, r.Seq)
	if r.Progress != nil {
		p := *r.Progress
		p.Message = textclip.Cut(p.Message, 1000, clipped)
		j.Progress = &p
	}
	j.Status = r.Status
	j.UpdatedAt = now
	switch r.Status {
	case StatusSucceeded:
		j.Result = textclip.Cut(r.Result, maxResult, clipped)
	case StatusFailed:
		j.Error = textclip.Cut(r.Error, 4000, clipped)
		if j.Error == "" {
			j.Error = "the job runner reported a failure without a reason"
		}
	case StatusCancelled:
		j.CancelReason = textclip.Cut(r.Error, 1000, clipped)
		if j.CancelReason == "" {
			j.CancelReason = "cancelled by the job runner"
		}
	}
	if Final(j.Status) {
		j.EndedAt = &now
	}
	return true, ""
}

// Key is the JOBS key of a job.
func Key(agentID, jobID string) string { return "job." + agentID + "." + jobID }

func newJobID(now time.Time) string {
	var r [5]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("job_%012x%s", now.UnixMilli(), hex.EncodeToString(r[:]))
}

// clipped marks a text cut to its bound (textclip.Cut).
const clipped = "\n[… clipped]"
