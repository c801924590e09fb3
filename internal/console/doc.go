// Package console is the operator console: a web app, served by
// cmd/console, that shows what the workers hold for a person's approval
// and lets that person decide, follows running turns live, lists dead
// letters and re-drives the steps that may be retried, and shows the
// fleet (micro instances, streams and consumers, fair-share backlog,
// steps per second and call latency).
//
// It talks to the workers only through the wire protocol (docs/protocol.md):
// it reads TURN_STATE's approval records, TURN_OUTPUTS, TURN_DEAD and the
// micro service's discovery subjects, and answers pending steps with the
// protocol's decision messages.
//
// Everything it shows came from a model, a tool or a gateway and is
// treated as hostile: pages are html/template (contextual escaping) and
// the one script sets textContent only; a Content Security Policy allows
// no inline script or style. A session needs the console's token
// (compared in constant time); every action needs the session's CSRF
// token and a same-origin request.
package console
