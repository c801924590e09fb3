package schedules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/schedules"
)

var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC) // a Friday

func TestCheckAccepts(t *testing.T) {
	tests := []struct {
		spec                schedules.Spec
		kind, pattern, zone string
		first               string
	}{
		{spec: schedules.Spec{At: "2026-05-01T12:30:00Z"}, kind: "at", pattern: "@at 2026-05-01T12:30:00Z", first: "2026-05-01T12:30:00Z"},
		{spec: schedules.Spec{At: "2026-05-01T12:30:00+02:00"}, kind: "at", pattern: "@at 2026-05-01T10:30:00Z", first: "2026-05-01T10:30:00Z"},
		{spec: schedules.Spec{At: "2026-05-01T12:30:00+02:00", TimeZone: "Europe/Paris"}, kind: "at", pattern: "@at 2026-05-01T10:30:00Z", first: "2026-05-01T10:30:00Z"},
		{spec: schedules.Spec{At: "2026-05-02 12:30", TimeZone: "Asia/Tokyo"}, kind: "at", pattern: "@at 2026-05-02T03:30:00Z", first: "2026-05-02T03:30:00Z"},
		{spec: schedules.Spec{Every: "15m"}, kind: "every", pattern: "@every 15m0s", first: "2026-05-01T10:15:00Z"},
		{spec: schedules.Spec{Every: "1h 30m"}, kind: "every", pattern: "@every 1h30m0s", first: "2026-05-01T11:30:00Z"},
		{spec: schedules.Spec{Cron: "0 0 9 * * mon-fri"}, kind: "cron", pattern: "0 0 9 * * mon-fri", first: "2026-05-04T09:00:00Z"},
		{spec: schedules.Spec{Cron: "0  0 9 * * MON-FRI", TimeZone: "Europe/Paris"}, kind: "cron", pattern: "0 0 9 * * MON-FRI", zone: "Europe/Paris", first: "2026-05-04T07:00:00Z"},
		{spec: schedules.Spec{Cron: "0 30 8 1 * *", TimeZone: "UTC"}, kind: "cron", pattern: "0 30 8 1 * *", first: "2026-06-01T08:30:00Z"},
		{spec: schedules.Spec{Cron: "@daily", TimeZone: "America/New_York"}, kind: "cron", pattern: "0 0 0 * * *", zone: "America/New_York", first: "2026-05-02T04:00:00Z"},
		{spec: schedules.Spec{Cron: "0 */15 * * * *"}, kind: "cron", pattern: "0 */15 * * * *", first: "2026-05-01T10:15:00Z"},
		{spec: schedules.Spec{Cron: "0 0 12 29 feb ?"}, kind: "cron", pattern: "0 0 12 29 feb ?", first: "2028-02-29T12:00:00Z"},
	}
	for _, tt := range tests {
		p, err := schedules.Check(tt.spec, now, time.Minute)
		if err != nil {
			t.Errorf("%+v: %v", tt.spec, err)
			continue
		}
		if p.Kind != tt.kind || p.Pattern != tt.pattern || p.TimeZone != tt.zone || p.First.Format(time.RFC3339) != tt.first {
			t.Errorf("%+v: got kind %s pattern %q zone %q first %s", tt.spec, p.Kind, p.Pattern, p.TimeZone, p.First.Format(time.RFC3339))
		}
	}
}

func TestCheckRejects(t *testing.T) {
	tests := []struct {
		spec schedules.Spec
		want string
	}{
		{schedules.Spec{}, "give exactly one of at"},
		{schedules.Spec{At: "2026-06-01T00:00:00Z", Every: "1h"}, "give exactly one of at"},
		{schedules.Spec{At: "2020-01-01T00:00:00Z"}, "at 2020-01-01T00:00:00Z is in the past (it is now 2026-05-01T10:00:00Z)"},
		{schedules.Spec{At: "2026-05-01T10:00:00Z"}, "is in the past"},
		{schedules.Spec{At: "tomorrow at nine"}, `at "tomorrow at nine" is not a time: use RFC 3339`},
		{schedules.Spec{At: "2026-05-01T12:00:00"}, "has no offset: add one"},
		{schedules.Spec{At: "2026-05-01T12:00:00+05:00", TimeZone: "Europe/Paris"}, "offset that is not Europe/Paris's"},
		{schedules.Spec{Every: "500ms"}, "every 500ms is shorter than the minimum interval 1m0s"},
		{schedules.Spec{Every: "30s"}, "every 30s is shorter than the minimum interval 1m0s"},
		{schedules.Spec{Every: "1d"}, `every "1d" is not an interval: use a number with a unit, e.g. 90s, 15m, 2h or 1h30m (days as hours: 24h)`},
		{schedules.Spec{Every: "-5m"}, "shorter than the minimum interval"},
		{schedules.Spec{Every: "90m500ms"}, "not a whole number of seconds"},
		{schedules.Spec{Every: "1h", TimeZone: "Europe/Paris"}, "time_zone does not apply to an interval"},
		{schedules.Spec{Cron: "0 9 * * *"}, `cron "0 9 * * *" has 5 fields; it needs 6: second minute hour day-of-month month day-of-week (e.g. "0 0 9 * * mon-fri" for 09:00 on weekdays); for the usual five-field form add a leading 0 for the seconds: "0 0 9 * * *"`},
		{schedules.Spec{Cron: "0 0 25 * * *"}, `cron "0 0 25 * * *", field 3 (hour): 25 is outside 0-23`},
		{schedules.Spec{Cron: "0 0 9 * * 7"}, "field 6 (day of week): 7 is outside 0-6 (Sunday is 0 or sun)"},
		{schedules.Spec{Cron: "0 0 9 * foo *"}, `field 5 (month): "foo" is neither a number from 1 to 12 nor a name (jan-dec)`},
		{schedules.Spec{Cron: "0 0 9-5 * * *"}, `field 3 (hour): "9-5": the range starts at 9, after its end 5`},
		{schedules.Spec{Cron: "0 */0 * * * *"}, `"*/0": the step after / must be a positive number`},
		{schedules.Spec{Cron: "@fortnightly"}, `"@fortnightly" is not a named schedule`},
		{schedules.Spec{Cron: "0 0 0 30 feb *"}, "never fires in the next five years"},
		{schedules.Spec{Cron: "* * * * * *"}, "fires 1s apart"},
		{schedules.Spec{Cron: "0,30 0 9 * * *"}, "fires 30s apart"},
		{schedules.Spec{Cron: "0 0 9 * * *", TimeZone: "Mars/Olympus_Mons"}, `unknown time_zone "Mars/Olympus_Mons": use an IANA name`},
		{schedules.Spec{Cron: "0 0 9 * * *", TimeZone: "Local"}, `time_zone "Local" is this server's zone`},
	}
	for _, tt := range tests {
		_, err := schedules.Check(tt.spec, now, time.Minute)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want it to contain %q", tt.spec, err, tt.want)
		}
	}
	// The server's floor holds whatever the configuration says.
	if _, err := schedules.Check(schedules.Spec{Every: "500ms"}, now, 0); err == nil || !strings.Contains(err.Error(), "minimum interval 1s") {
		t.Errorf("500ms with no minimum: %v", err)
	}
}

func TestCronNext(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	tests := []struct {
		expr  string
		loc   *time.Location
		from  string
		wants []string
	}{
		{"0 0 9 * * mon-fri", time.UTC, "2026-05-01T09:00:00Z", []string{"2026-05-04T09:00:00Z", "2026-05-05T09:00:00Z"}},
		{"30 15 10 * * *", time.UTC, "2026-05-01T10:15:29Z", []string{"2026-05-01T10:15:30Z", "2026-05-02T10:15:30Z"}},
		// Day of month or day of week when neither is *: the 13th, or a Friday.
		{"0 0 0 13 * fri", time.UTC, "2026-05-01T10:00:00Z", []string{"2026-05-08T00:00:00Z", "2026-05-13T00:00:00Z", "2026-05-15T00:00:00Z"}},
		// Across the spring DST change in Paris (29 March 2026).
		{"0 30 9 * * *", paris, "2026-03-28T12:00:00Z", []string{"2026-03-29T07:30:00Z", "2026-03-30T07:30:00Z"}},
		{"0 0 0 1 1 *", time.UTC, "2026-05-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"5/20 * * * * *", time.UTC, "2026-05-01T10:00:00Z", []string{"2026-05-01T10:00:05Z", "2026-05-01T10:00:25Z", "2026-05-01T10:00:45Z", "2026-05-01T10:01:05Z"}},
	}
	for _, tt := range tests {
		c, err := schedules.ParseCron(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		at, _ := time.Parse(time.RFC3339, tt.from)
		for _, want := range tt.wants {
			next, ok := c.Next(at, tt.loc)
			if !ok || next.UTC().Format(time.RFC3339) != want {
				t.Errorf("%s after %s: %s, want %s", tt.expr, at.Format(time.RFC3339), next.UTC().Format(time.RFC3339), want)
				break
			}
			at = next
		}
	}
}

func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 0 9 * * mon-fri", "*/5 * * * * *", "@daily", "0 0 0 30 feb ?", "1-2/3,4 5 6 7 8 9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := schedules.ParseCron(s)
		if err != nil {
			return
		}
		if _, err := schedules.ParseCron(c.String()); err != nil {
			t.Fatalf("%q parsed, its normal form %q did not: %v", s, c.String(), err)
		}
		c.Next(now, time.UTC)
	})
}
