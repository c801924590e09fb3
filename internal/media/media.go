package media

import (
	"bytes"
	"encoding/base64"
	"strings"
)

// The types the model takes, as Sniff names them.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
	PDF  = "application/pdf"
)

// Sniff names the type of data from its first bytes: one of PNG, JPEG,
// GIF, WebP or PDF, or "" for anything else. A declared type or a file
// name's extension is never trusted: the bytes decide.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return JPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return GIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return WebP
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return PDF
	}
	return ""
}

// IsImage reports whether mime is one of the image types Sniff names.
func IsImage(mime string) bool {
	return mime == PNG || mime == JPEG || mime == GIF || mime == WebP
}

// DataURL is data as a base64 data URL of type mime.
func DataURL(mime string, data []byte) string {
	var b strings.Builder
	b.Grow(DataURLLen(mime, len(data)))
	b.WriteString("data:")
	b.WriteString(mime)
	b.WriteString(";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	_, _ = enc.Write(data)
	_ = enc.Close()
	return b.String()
}

// DataURLLen is the length of the data URL of n bytes of type mime. It is
// also its length inside a JSON string: base64 needs no escaping.
func DataURLLen(mime string, n int) int {
	return len("data:") + len(mime) + len(";base64,") + base64.StdEncoding.EncodedLen(n)
}
