package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is what a run found.
type Report struct {
	Duration time.Duration
	// Steps published (main and task turns), and of them: done (at least
	// one step.done), lost (none), doubled (more than one).
	Published, MainSteps, TaskSteps int
	Done, Lost, Doubled             int
	// FloodSteps are the main steps of the flooding key (FloodKey).
	FloodSteps int
	// OutputsDoubled counts call.output events beyond the first of a
	// call; OutputsMissing, calls of a done step without one; Unexpected,
	// step.done events of steps never published.
	OutputsDoubled, OutputsMissing, Unexpected int
	// Marks is the number of mark bodies run; MarksDoubled, labels that
	// ran more than once; MarksMissing, marks that reported ok but never
	// ran; MarksInterrupted, marks reported interrupted.
	Marks, MarksDoubled, MarksMissing, MarksInterrupted int
	// Workflows is the number of start_workflow calls; WorkflowsDoubled,
	// calls that started more than one workflow; WorkflowsMissing, calls
	// that reported ok without one.
	Workflows, WorkflowsInterrupted, WorkflowsDoubled, WorkflowsMissing int
	// TasksMissing counts start_workflow calls that reported ok without a
	// task.ready event for each of their tasks.
	TasksMissing int
	// TasksReady is the number of tasks announced; TasksUnfinished, those
	// whose turn never ended; ResultsCommitted, tasks accepted with the
	// result found in WORKFLOWS and in a task.accepted event; ResultsLost,
	// tasks accepted without.
	TasksReady, TasksUnfinished, ResultsCommitted, ResultsLost int
	// DeadLetters are steps that reached the delivery limit or could not
	// be processed; Leftover, steps still in the work queues at the end.
	DeadLetters, Leftover int
	// CallErrors counts the calls that ended in an error, by
	// "<tool>:<kind>" (interrupted marks, a start_workflow that could not
	// store its workflow while a leader was down, …): the model is told,
	// nothing is lost or doubled.
	CallErrors map[string]int
	// WorkflowWritesFailed counts the calls of the workflow tools that
	// could not write what they were for (a start_workflow that ended in
	// an error other than interrupted, a submit_result that could not be
	// recorded): every such write must survive the faults.
	WorkflowWritesFailed int
	// CallErrorExamples are a few of the other call errors, with their
	// messages.
	CallErrorExamples []string
	// Faults injected, by kind.
	Faults map[Fault]int
	// WorkerExits counts worker processes that exited on their own (each
	// was replaced); PublishRetries, step publishes tried again.
	WorkerExits, PublishRetries int
	// Stalled is set when the run stopped waiting for outstanding steps.
	Stalled bool
	// Examples of each kind of violation, a few each.
	Examples map[string][]string
	// LogDir holds the worker processes' logs.
	LogDir string
}

// Problems lists every violation of the delivery promises; none means
// the run proved them.
func (r *Report) Problems() []string {
	var out []string
	add := func(n int, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	if r.Published == 0 {
		out = append(out, "no step was published")
	}
	add(r.Lost, "steps lost (no step.done)")
	add(r.Doubled, "steps doubled (more than one step.done)")
	add(r.OutputsDoubled, "call.output events doubled")
	add(r.OutputsMissing, "call.output events missing from done steps")
	add(r.Unexpected, "step.done events for steps never published")
	add(r.MarksDoubled, "mark bodies run more than once")
	add(r.MarksMissing, "marks reported ok that never ran")
	add(r.WorkflowsDoubled, "start_workflow calls that started more than one workflow")
	add(r.WorkflowsMissing, "start_workflow calls reported ok without a workflow")
	add(r.TasksMissing, "start_workflow calls reported ok without a task.ready for every task")
	add(r.WorkflowWritesFailed, "workflow tool calls that failed to write (start_workflow, submit_result)")
	add(r.ResultsLost, "accepted task results lost")
	add(r.TasksUnfinished, "announced tasks whose turn never ended")
	add(r.DeadLetters, "steps dead-lettered")
	add(r.Leftover, "steps left in the work queues")
	return out
}

// OK reports whether the run found no violation.
func (r *Report) OK() bool { return len(r.Problems()) == 0 }

// FaultsTotal is the number of faults injected.
func (r *Report) FaultsTotal() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// String is the report as the chaos program prints it.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "duration         %s\n", r.Duration.Round(time.Millisecond))
	fmt.Fprintf(&b, "steps            %d published (%d main, %d task), %d done, %d lost, %d doubled\n", r.Published, r.MainSteps, r.TaskSteps, r.Done, r.Lost, r.Doubled)
	if r.FloodSteps > 0 {
		fmt.Fprintf(&b, "flood            %d of the %d main steps were the flooding key's (%s), the rest %d quiet keys'\n", r.FloodSteps, r.MainSteps, FloodKey, QuietKeys)
	}
	fmt.Fprintf(&b, "call outputs     %d doubled, %d missing; %d unexpected step.done\n", r.OutputsDoubled, r.OutputsMissing, r.Unexpected)
	fmt.Fprintf(&b, "marks            %d run, %d doubled, %d missing, %d interrupted\n", r.Marks, r.MarksDoubled, r.MarksMissing, r.MarksInterrupted)
	fmt.Fprintf(&b, "workflows        %d started, %d interrupted, %d doubled, %d missing, %d with tasks missing\n", r.Workflows, r.WorkflowsInterrupted, r.WorkflowsDoubled, r.WorkflowsMissing, r.TasksMissing)
	fmt.Fprintf(&b, "task results     %d tasks announced, %d committed, %d lost, %d unfinished\n", r.TasksReady, r.ResultsCommitted, r.ResultsLost, r.TasksUnfinished)
	fmt.Fprintf(&b, "dead letters     %d; left in work queues %d\n", r.DeadLetters, r.Leftover)
	var errs []string
	for k, n := range r.CallErrors {
		errs = append(errs, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(errs)
	if len(errs) == 0 {
		errs = []string{"none"}
	}
	fmt.Fprintf(&b, "call errors      %s; %d failed workflow writes\n", strings.Join(errs, " "), r.WorkflowWritesFailed)
	for _, e := range r.CallErrorExamples {
		fmt.Fprintf(&b, "  e.g. %s\n", e)
	}
	var kinds []string
	for k, n := range r.Faults {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(kinds)
	fmt.Fprintf(&b, "faults           %d (%s)\n", r.FaultsTotal(), strings.Join(kinds, " "))
	fmt.Fprintf(&b, "worker exits     %d unexpected; publish retries %d\n", r.WorkerExits, r.PublishRetries)
	if r.Stalled {
		b.WriteString("stalled          gave up waiting for outstanding steps\n")
	}
	if p := r.Problems(); len(p) > 0 {
		fmt.Fprintf(&b, "FAILED: %s\n", strings.Join(p, "; "))
		kinds := make([]string, 0, len(r.Examples))
		for k := range r.Examples {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			for _, e := range r.Examples[k] {
				fmt.Fprintf(&b, "  %s: %s\n", k, e)
			}
		}
	} else {
		b.WriteString("OK: no step lost or doubled, no tool body run twice, no committed result lost, no workflow write failed\n")
	}
	if r.LogDir != "" {
		fmt.Fprintf(&b, "worker logs      %s\n", r.LogDir)
	}
	return b.String()
}
