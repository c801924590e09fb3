package schedules

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kinds of schedule.
const (
	KindAt    = "at"
	KindEvery = "every"
	KindCron  = "cron"
)

// ServerMinInterval is the shortest interval the server schedules.
const ServerMinInterval = time.Second

// cronGaps is how many upcoming fire times of a cron expression are
// checked against the minimum interval.
const cronGaps = 64

// Spec is when a schedule fires, as create_schedule receives it: exactly
// one of At, Every and Cron, and TimeZone for Cron (or for an At without
// an offset).
type Spec struct {
	At       string
	Every    string
	Cron     string
	TimeZone string
}

// Plan is a checked Spec: what goes in the Nats-Schedule headers and
// when it fires first.
type Plan struct {
	Kind string
	// Pattern is the Nats-Schedule header: "@at <RFC 3339 UTC>",
	// "@every <duration>", or six cron fields.
	Pattern string
	// TimeZone is the Nats-Schedule-Time-Zone header, cron only; empty
	// means UTC.
	TimeZone string
	// Expression is the schedule as stored and shown: the UTC time, the
	// interval or the cron expression as given.
	Expression string
	First      time.Time
	Interval   time.Duration
}

// Check validates a Spec at now: the expression parses, fires at least
// once, not in the past, and never more often than minInterval (floored
// at ServerMinInterval); the time zone exists. Its errors are written
// for the model.
func Check(s Spec, now time.Time, minInterval time.Duration) (Plan, error) {
	minInterval = max(minInterval, ServerMinInterval)
	s.At, s.Every, s.Cron, s.TimeZone = strings.TrimSpace(s.At), strings.TrimSpace(s.Every), strings.TrimSpace(s.Cron), strings.TrimSpace(s.TimeZone)
	n := 0
	for _, v := range []string{s.At, s.Every, s.Cron} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return Plan{}, errors.New("give exactly one of at (a one-off time), every (an interval) or cron (a cron expression)")
	}
	var loc *time.Location
	if s.TimeZone != "" {
		var err error
		if loc, err = location(s.TimeZone); err != nil {
			return Plan{}, err
		}
	}
	switch {
	case s.At != "":
		return checkAt(s.At, loc, now)
	case s.Every != "":
		if loc != nil {
			return Plan{}, errors.New("time_zone does not apply to an interval; leave it out (it is for cron and for an at time without an offset)")
		}
		return checkEvery(s.Every, now, minInterval)
	default:
		return checkCron(s.Cron, s.TimeZone, loc, now, minInterval)
	}
}

func location(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errors.New(`time_zone "Local" is this server's zone, not yours: use an IANA name such as Europe/Paris or America/New_York`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time_zone %q: use an IANA name such as Europe/Paris, America/New_York or UTC", name)
	}
	return loc, nil
}

// localLayouts are the forms of an at time without an offset.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

func checkAt(at string, loc *time.Location, now time.Time) (Plan, error) {
	t, err := time.Parse(time.RFC3339, at)
	if err == nil && loc != nil {
		_, off := t.In(loc).Zone()
		if _, given := t.Zone(); given != off {
			return Plan{}, fmt.Errorf("at %q has an offset that is not %s's at that time; drop the offset or the time_zone", at, loc)
		}
	}
	if err != nil {
		var local error = err
		for _, layout := range localLayouts {
			var lt time.Time
			if lt, local = time.ParseInLocation(layout, at, time.UTC); local == nil {
				if loc == nil {
					return Plan{}, fmt.Errorf("at %q has no offset: add one (2026-05-01T09:00:00Z, 2026-05-01T09:00:00+02:00) or give time_zone", at)
				}
				t = time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, loc)
				break
			}
		}
		if local != nil {
			return Plan{}, fmt.Errorf("at %q is not a time: use RFC 3339, e.g. 2026-05-01T09:00:00Z or 2026-05-01T09:00:00+02:00", at)
		}
	}
	t = t.UTC().Truncate(time.Second)
	if !t.After(now) {
		return Plan{}, fmt.Errorf("at %s is in the past (it is now %s); give a future time", t.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	u := t.Format(time.RFC3339)
	return Plan{Kind: KindAt, Pattern: "@at " + u, Expression: u, First: t}, nil
}

func checkEvery(every string, now time.Time, minInterval time.Duration) (Plan, error) {
	d, err := time.ParseDuration(strings.ReplaceAll(every, " ", ""))
	if err != nil {
		return Plan{}, fmt.Errorf("every %q is not an interval: use a number with a unit, e.g. 90s, 15m, 2h or 1h30m (days as hours: 24h)", every)
	}
	if d < minInterval {
		return Plan{}, fmt.Errorf("every %s is shorter than the minimum interval %s", d, minInterval)
	}
	if d%time.Second != 0 {
		return Plan{}, fmt.Errorf("every %s is not a whole number of seconds", d)
	}
	return Plan{Kind: KindEvery, Pattern: "@every " + d.String(), Expression: d.String(), First: now.UTC().Round(time.Second).Add(d), Interval: d}, nil
}

func checkCron(expr, zone string, loc *time.Location, now time.Time, minInterval time.Duration) (Plan, error) {
	c, err := ParseCron(expr)
	if err != nil {
		return Plan{}, err
	}
	if loc == nil {
		loc, zone = time.UTC, ""
	}
	first, ok := c.Next(now, loc)
	if !ok {
		return Plan{}, fmt.Errorf("cron %q never fires in the next five years (a day that does not exist, such as 30 February?)", expr)
	}
	prev := first
	for range cronGaps {
		next, ok := c.Next(prev, loc)
		if !ok {
			break
		}
		if gap := next.Sub(prev); gap < minInterval {
			return Plan{}, fmt.Errorf("cron %q fires %s apart (%s, then %s), more often than the minimum interval %s",
				expr, gap, prev.Format(time.RFC3339), next.Format(time.RFC3339), minInterval)
		}
		prev = next
	}
	if zone == "UTC" {
		zone = ""
	}
	return Plan{Kind: KindCron, Pattern: c.String(), TimeZone: zone, Expression: expr, First: first.UTC()}, nil
}
