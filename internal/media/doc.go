// Package media prepares the images and files a tool returns for the
// model: it recognises the formats the Responses API takes (PNG, JPEG,
// GIF and WebP images, PDF files) from their bytes, writes them as data
// URLs, and fits a call's media to a budget of encoded bytes.
//
// Fitting keeps what fits as it is (an image is still decoded once, so
// that nothing the model's provider would refuse is sent), scales an
// image that does not fit down until it does (re-encoded as JPEG, or as
// PNG when it has transparency), and replaces anything else that does
// not fit (a PDF, an image that does not decode or has too many pixels,
// audio and other types) with a note the model can read: what was left
// out, why, and where it is.
//
// Every byte here may come from a hostile source (an MCP server, a web
// page, a file a command wrote): dimensions are checked before anything
// is decoded, so that a small file cannot claim gigabytes of pixels.
package media
