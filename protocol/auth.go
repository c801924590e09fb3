package protocol

// Protocol 1.3: a call to an MCP server for which the call's credential
// owner (its agent, or its fairness key) holds no usable token ends with
// the error kind AuthRequired, and, before that call.output, one
// auth.required event on the same subject.
const (
	EventAuthRequired = "auth.required"
	// AuthRequired is the error kind of such a call: a person must
	// connect the account; the model may go on without the tool.
	AuthRequired ErrorKind = "auth_required"
)

// AuthRequiredEvent is the auth.required event: where a person connects
// the account the call needed. URL carries no secret.
type AuthRequiredEvent struct {
	Type    string `json:"type"`
	AgentID string `json:"agent_id"`
	TurnID  string `json:"turn_id"`
	Step    int64  `json:"step"`
	CallID  string `json:"call_id"`
	// Server is the MCP server's name (its tools' namespace).
	Server string `json:"server"`
	// URL is the console's connect page, or a URL the operator
	// configured.
	URL string `json:"url"`
}

func (*AuthRequiredEvent) event() {}

// MsgID is the event's Nats-Msg-Id: the call.output's, then ".auth".
func (ev *AuthRequiredEvent) MsgID() string {
	return CallOutputMsgID(ev.AgentID, ev.TurnID, ev.Step, ev.CallID) + ".auth"
}
