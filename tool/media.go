package tool

// Media is an image or a file a tool returns beside its text. The runtime
// turns it into an input_image or input_file part of the call's output,
// scales an image down to the media budget, and replaces anything else
// that does not fit with a text part naming what was left out.
type Media struct {
	// MIMEType is the media type, e.g. "image/png" or "application/pdf".
	MIMEType string
	// Data is the content.
	Data []byte
	// Filename names a file part (input_file), and says what was left out.
	Filename string
	// Source says where the content is, for the note that replaces it
	// when it does not fit (a path in the home, a URL, an MCP resource).
	Source string
}
