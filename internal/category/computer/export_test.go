package computer

// EditedSize exposes editedSize to the tests of its overflow checks.
var EditedSize = editedSize

// QuotaWalksOnly makes c's quota follow commands by walks alone, without
// inotify, to measure what inotify adds.
func QuotaWalksOnly(c *Category) {
	if c.homes.quota != nil {
		c.homes.quota.noNotify = true
	}
}
