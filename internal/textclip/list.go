package textclip

import "fmt"

// List keeps the first maxItems of list, each clipped to each bytes
// (Text), and ends it with "and N more" when any were left out.
func List(list []string, maxItems, each int) []string {
	if len(list) <= maxItems {
		var long bool
		for _, s := range list {
			long = long || JSONLen(s) > each
		}
		if !long {
			return list
		}
	}
	out := make([]string, 0, min(len(list), maxItems)+1)
	for _, s := range list[:min(len(list), maxItems)] {
		out = append(out, Text(s, each))
	}
	if len(list) > maxItems {
		out = append(out, fmt.Sprintf("and %d more", len(list)-maxItems))
	}
	return out
}
