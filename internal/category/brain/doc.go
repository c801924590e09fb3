// Package brain provides the brain category: pages an agent keeps across
// turns, and the tools to find and read them again.
//
// Pages live in the BRAIN key-value bucket, one key per page:
// page.<agent_id>.<title in unpadded base64url>, whose value is the page
// record (title, markdown body, times, the call that last wrote it). Any
// worker serves any turn: nothing is kept on a worker's disk.
//
// Tools, in catalog order: recall (ranked full-text search with snippets)
// and get_page (one page, a range of lines at a time) are read-only;
// list_pages, write_page and delete_page complete the main-turn set.
// Category gives main turns that bind "brain" all five and task turns
// (workflowtask.Config.Brain) only recall and get_page.
//
// recall ranks with Okapi BM25 (k1 1.2, b 0.75) over title and body, the
// title counting twice. Text is cut into lower-cased runs of letters and
// digits (English plurals folded to the singular); runs of Han, kana and
// Hangul are cut into overlapping pairs of characters (and, in pages,
// single characters too), so Japanese or Chinese text is searchable
// without a dictionary. Each worker keeps the
// index of recently searched agents in memory (bounded by
// Config.CacheBytes) and brings it up to date before every search by
// reading the bucket's changes since the revision it last saw, so a page
// written on one worker is found by the next search on any worker.
package brain
