package tools

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/protocol"
)

// Kind classifies why a call did not succeed: the wire protocol's error
// kinds.
type Kind = protocol.ErrorKind

const (
	UnknownTool      Kind = "unknown_tool"
	NotLoaded        Kind = "not_loaded"
	InvalidArguments Kind = "invalid_arguments"
	ToolError        Kind = "tool_error"
	Timeout          Kind = "timeout"
	Aborted          Kind = "aborted"
	Interrupted      Kind = "interrupted"
	Rejected         Kind = "rejected"
	Internal         Kind = "internal"
)

// Error is the one coded error of a call. Message is written for the model:
// it says what went wrong and what to do about it.
type Error struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	// Repairs names the repair-ladder rungs that ran on arguments that were
	// then refused (invalid_arguments only); the outcome reports them.
	Repairs []string `json:"-"`
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf builds an *Error; tools return it to choose a kind other than
// tool_error.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// maxShapeBytes bounds the schema quoted back to the model in an
// invalid_arguments message.
const maxShapeBytes = 4 << 10

// argumentsError turns a parse or validation failure into the message the
// model reads: every violation with its JSON pointer, and the expected
// shape so that the next call can be right in one try.
func (t *Tool) argumentsError(err error, repairs []string) *Error {
	var b strings.Builder
	fmt.Fprintf(&b, "The arguments for %s were rejected.\n", t.spec.Name)
	var ve *schema.ValidationError
	switch {
	case errors.As(err, &ve):
		b.WriteString("Violations (JSON pointer: problem):\n")
		WriteViolations(&b, ve.Violations)
	default:
		// A *schema.SyntaxError is one sentence saying what is wrong,
		// where, and what to send instead.
		b.WriteString(err.Error())
		b.WriteByte('\n')
	}
	if len(repairs) > 0 {
		fmt.Fprintf(&b, "(Repairs applied before this check: %s.)\n", strings.Join(repairs, ", "))
	}
	shape := t.params.Sent()
	if len(shape) > maxShapeBytes {
		fmt.Fprintf(&b, "Send a JSON object that matches the tool's parameters schema (%d bytes, see the tool definition).", len(shape))
	} else {
		fmt.Fprintf(&b, "Expected a JSON object matching this schema: %s", shape)
	}
	return &Error{Kind: InvalidArguments, Message: b.String(), Repairs: repairs}
}

// Bounds of a violation list the model reads: a model that sends 60,000
// wrong items needs the first few and the count, not 3 MB of the same
// line (which would not fit one event either).
const (
	MaxViolations     = 50
	maxViolationBytes = 300
)

// WriteViolations writes the first MaxViolations of vs as "- pointer:
// problem" lines, each clipped, and then how many more there are.
func WriteViolations(b *strings.Builder, vs []schema.Violation) {
	for i, v := range vs {
		if i == MaxViolations {
			fmt.Fprintf(b, "- … and %d more violation%s\n", len(vs)-i, Plural(len(vs)-i))
			return
		}
		ptr := v.Pointer
		if ptr == "" {
			ptr = "/"
		}
		b.WriteString(Clip("- "+ptr+": "+v.Message, maxViolationBytes))
		b.WriteByte('\n')
	}
}
