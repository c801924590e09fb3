package tools

// Clip shortens s to at most n characters, ending a shortened one with
// "…": for titles and labels quoted in one-line results.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Plural is "s" unless n is 1: fmt.Sprintf("%d page%s", n, Plural(n)).
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
