package backgroundjobs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

func TestApply(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	pct := func(f float64) *float64 { return &f }
	j := &Job{Status: StatusQueued}
	steps := []struct {
		r       protocol.JobReport
		changed bool
		status  string
	}{
		{protocol.JobReport{Status: StatusRunning, Seq: 2, Progress: &protocol.JobProgress{Percent: pct(20), Message: "started"}}, true, StatusRunning},
		{protocol.JobReport{Status: StatusRunning, Seq: 1, Progress: &protocol.JobProgress{Percent: pct(10)}}, false, StatusRunning}, // stale
		{protocol.JobReport{Status: StatusRunning, Progress: &protocol.JobProgress{Percent: pct(60)}}, true, StatusRunning},          // unordered
		{protocol.JobReport{Status: StatusFailed, Seq: 3}, true, StatusFailed},
		{protocol.JobReport{Status: StatusSucceeded, Seq: 4, Result: "late"}, false, StatusFailed}, // final
	}
	for i, s := range steps {
		changed, why := j.apply(&s.r, now, 100)
		if changed != s.changed || j.Status != s.status {
			t.Fatalf("step %d: changed %v (%s), status %s", i, changed, why, j.Status)
		}
	}
	if *j.Progress.Percent != 60 || j.Error == "" || j.EndedAt == nil || j.Result != "" || j.ReportSeq != 3 {
		t.Errorf("job %+v", j)
	}
	if got := textclip.Cut(strings.Repeat("é", 100), 50, clipped); len(got) > 50 || !strings.HasSuffix(got, "[… clipped]") {
		t.Errorf("clip %q", got)
	}
}

// FuzzReport feeds the report parser what a job runner might send: it
// never panics, and an ended job never changes.
func FuzzReport(f *testing.F) {
	for _, s := range []string{
		`{"status":"running","seq":1,"progress":{"percent":40,"message":"x"}}`,
		`{"status":"succeeded","result":"r"}`, `{"status":"failed","error":"e"}`, `{"status":"cancelled"}`,
		`{"status":"running","progress":{"percent":140}}`, `{"status":"done"}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r protocol.JobReport
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if dec.Decode(&r) != nil || checkReport(&r) != nil {
			return
		}
		open := &Job{Status: StatusRunning}
		open.apply(&r, time.Now(), 64)
		if len(open.Result) > 64 || (Final(open.Status) && open.EndedAt == nil) {
			t.Fatalf("after %s: %+v", data, open)
		}
		ended := &Job{Status: StatusSucceeded, Result: "kept"}
		if changed, _ := ended.apply(&r, time.Now(), 64); changed || ended.Result != "kept" {
			t.Fatalf("an ended job changed by %s", data)
		}
	})
}
