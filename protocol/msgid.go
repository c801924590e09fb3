package protocol

// versioned is the step token of an event's message id: the step
// number, and for a re-sent version of it "~" and the version. No plain
// step number has a "~", so versioned ids never collide with the first
// version's.
func versioned(agentID, turnID string, step int64, version string) string {
	id := StepMsgID(agentID, turnID, step)
	if version != "" {
		id += "~" + version
	}
	return id
}

// MsgID is the event's Nats-Msg-Id: CallOutputMsgID, with the step token
// versioned when Version is set.
func (ev *CallOutput) MsgID() string {
	if ev.Version == "" {
		return CallOutputMsgID(ev.AgentID, ev.TurnID, ev.Step, ev.CallID)
	}
	return versioned(ev.AgentID, ev.TurnID, ev.Step, ev.Version) + "." + callToken(ev.CallID)
}

// MsgID is the event's Nats-Msg-Id: StepDoneMsgID, with the step token
// versioned when Version is set.
func (ev *StepDone) MsgID() string {
	return versioned(ev.AgentID, ev.TurnID, ev.Step, ev.Version) + ".done"
}
