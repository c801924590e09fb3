package tools

// Plural is "s" unless n is 1: fmt.Sprintf("%d page%s", n, Plural(n)).
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
