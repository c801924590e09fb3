package turn

import (
	"encoding/json"
	"time"
)

// outcomeFields is Outcome without its methods, for the JSON below.
type outcomeFields Outcome

// MarshalJSON writes the journal's record of an outcome: Duration as
// duration_ms, the unit of the call.output event.
func (o Outcome) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		outcomeFields
		DurationMS int64 `json:"duration_ms"`
	}{outcomeFields(o), o.Duration.Milliseconds()})
}

// UnmarshalJSON reads duration_ms, and the nanoseconds of "duration" that
// workers before it stored: during a rolling upgrade a new worker replays
// outcomes an old one journaled.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var v struct {
		*outcomeFields
		DurationMS *int64 `json:"duration_ms"`
		DurationNS *int64 `json:"duration"`
	}
	v.outcomeFields = (*outcomeFields)(o)
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch {
	case v.DurationMS != nil:
		o.Duration = time.Duration(*v.DurationMS) * time.Millisecond
	case v.DurationNS != nil:
		o.Duration = time.Duration(*v.DurationNS)
	}
	return nil
}
