package computer

// EditedSize exposes editedSize to the tests of its overflow checks.
var EditedSize = editedSize
