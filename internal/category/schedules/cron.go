package schedules

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed six-field cron expression, in the grammar the NATS
// server's message scheduler accepts: second minute hour day-of-month
// month day-of-week, each a comma-separated list of *, ?, a number or a
// name (jan-dec, sun-sat), an optional -end and an optional /step.
type Cron struct {
	second, minute, hour, dom, month, dow uint64
	// fields are the six fields, named schedules expanded.
	fields string
}

// String is the expression as six fields separated by single spaces.
func (c *Cron) String() string { return c.fields }

// starBit marks a field given as * or ? (it changes how the two day
// fields combine, as in the server).
const starBit = 1 << 63

type field struct {
	name     string
	min, max uint
	names    map[string]uint
}

var fields = [6]field{
	{name: "second", min: 0, max: 59},
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]uint{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{name: "day of week", min: 0, max: 6, names: map[string]uint{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// predefined are the named schedules the server expands.
var predefined = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

// ParseCron parses expr; the error says which field is wrong and how.
func ParseCron(expr string) (*Cron, error) {
	expr = strings.TrimSpace(expr)
	if full, ok := predefined[strings.ToLower(expr)]; ok {
		expr = full
	} else if strings.HasPrefix(expr, "@") {
		return nil, fmt.Errorf("%q is not a named schedule; the names are @hourly, @daily, @weekly, @monthly and @yearly", expr)
	}
	fs := strings.Fields(expr)
	if len(fs) != 6 {
		msg := fmt.Sprintf("cron %q has %d fields; it needs 6: second minute hour day-of-month month day-of-week (e.g. \"0 0 9 * * mon-fri\" for 09:00 on weekdays)", expr, len(fs))
		if len(fs) == 5 {
			msg += fmt.Sprintf("; for the usual five-field form add a leading 0 for the seconds: %q", "0 "+strings.Join(fs, " "))
		}
		return nil, fmt.Errorf("%s", msg)
	}
	var bits [6]uint64
	for i, f := range fs {
		b, err := parseField(f, fields[i])
		if err != nil {
			return nil, fmt.Errorf("cron %q, field %d (%s): %v", expr, i+1, fields[i].name, err)
		}
		bits[i] = b
	}
	return &Cron{second: bits[0], minute: bits[1], hour: bits[2], dom: bits[3], month: bits[4], dow: bits[5], fields: strings.Join(fs, " ")}, nil
}

func parseField(s string, f field) (uint64, error) {
	var bits uint64
	for _, expr := range strings.Split(s, ",") {
		if expr == "" {
			return 0, fmt.Errorf("%q has an empty list item", s)
		}
		b, err := parseRange(expr, f)
		if err != nil {
			return 0, err
		}
		bits |= b
	}
	return bits, nil
}

func parseRange(expr string, f field) (uint64, error) {
	rangeAndStep := strings.Split(expr, "/")
	lowHigh := strings.Split(rangeAndStep[0], "-")
	var start, end, step uint = 0, 0, 1
	var extra uint64
	var err error
	if lowHigh[0] == "*" || lowHigh[0] == "?" {
		if len(lowHigh) > 1 {
			return 0, fmt.Errorf("%q: * cannot start a range", expr)
		}
		start, end, extra = f.min, f.max, starBit
	} else {
		if start, err = value(lowHigh[0], f); err != nil {
			return 0, err
		}
		switch len(lowHigh) {
		case 1:
			end = start
		case 2:
			if end, err = value(lowHigh[1], f); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("%q has more than one -", expr)
		}
	}
	switch len(rangeAndStep) {
	case 1:
	case 2:
		n, err := strconv.Atoi(rangeAndStep[1])
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q: the step after / must be a positive number", expr)
		}
		step = uint(n)
		if len(lowHigh) == 1 && extra == 0 {
			end = f.max // "5/15" means 5 to the end, every 15
		}
		if step > 1 {
			extra = 0
		}
	default:
		return 0, fmt.Errorf("%q has more than one /", expr)
	}
	if start > end {
		return 0, fmt.Errorf("%q: the range starts at %d, after its end %d", expr, start, end)
	}
	var bits uint64
	for i := start; i <= end; i += step {
		bits |= 1 << i
	}
	return bits | extra, nil
}

func value(s string, f field) (uint, error) {
	if n, ok := f.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		if f.names != nil {
			return 0, fmt.Errorf("%q is neither a number from %d to %d nor a name (%s)", s, f.min, f.max, nameList(f))
		}
		return 0, fmt.Errorf("%q is not a number from %d to %d", s, f.min, f.max)
	}
	if n < int(f.min) || n > int(f.max) {
		hint := ""
		if f.name == "day of week" && n == 7 {
			hint = " (Sunday is 0 or sun)"
		}
		return 0, fmt.Errorf("%d is outside %d-%d%s", n, f.min, f.max, hint)
	}
	return uint(n), nil
}

func nameList(f field) string {
	if f.name == "month" {
		return "jan-dec"
	}
	return "sun-sat"
}

// Next is the first time after t, in loc, that the expression matches;
// false when there is none in the next five years (as the server).
func (c *Cron) Next(t time.Time, loc *time.Location) (time.Time, bool) {
	t = t.In(loc).Truncate(time.Second).Add(time.Second)
	truncated := false
	limit := t.Year() + 5
wrap:
	if t.Year() > limit {
		return time.Time{}, false
	}
	for 1<<uint(t.Month())&c.month == 0 {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
		}
		if t = t.AddDate(0, 1, 0); t.Month() == time.January {
			goto wrap
		}
	}
	for !c.dayMatches(t) {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		}
		if t = t.AddDate(0, 0, 1); t.Day() == 1 {
			goto wrap
		}
	}
	for 1<<uint(t.Hour())&c.hour == 0 {
		if !truncated {
			truncated = true
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
		}
		if t = t.Add(time.Hour); t.Hour() == 0 {
			goto wrap
		}
	}
	for 1<<uint(t.Minute())&c.minute == 0 {
		if !truncated {
			truncated = true
			t = t.Truncate(time.Minute)
		}
		if t = t.Add(time.Minute); t.Minute() == 0 {
			goto wrap
		}
	}
	for 1<<uint(t.Second())&c.second == 0 {
		if !truncated {
			truncated = true
			t = t.Truncate(time.Second)
		}
		if t = t.Add(time.Second); t.Second() == 0 {
			goto wrap
		}
	}
	return t, true
}

// dayMatches: when either day field is *, both must match; otherwise
// either may (the usual cron rule, and the server's).
func (c *Cron) dayMatches(t time.Time) bool {
	domMatch := 1<<uint(t.Day())&c.dom > 0
	dowMatch := 1<<uint(t.Weekday())&c.dow > 0
	if c.dom&starBit > 0 || c.dow&starBit > 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}
