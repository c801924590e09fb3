package computer

import "hash/maphash"

// entrySet is the entries a follower's estimate counts, each by a hash
// of its path in the home: the last walk's, and what the events made and
// removed since. An event changes the count only when it changes the
// set: a name made that the set holds (the walk read it before its event
// was read, or its directory's listing did when its watch came, or a
// rename replaced it) counts nothing, nor does a name removed that the
// set does not hold (removed before the walk read its directory).
//
// That makes the count exact whatever a walk overlapped: for each name,
// the events after any point alternate made and removed, so once the
// first of them is read the set holds the name exactly when it is there
// now, and the count moved by the difference between that and what the
// walk saw. Without it, a walk's result and the events queued before
// its end were both counted (a writer of empty files was stopped at
// 4,005 of its 5,000 entries where a command has a cgroup, whose stop
// on entries no walk confirms), and each rename over an existing name
// counted one entry more until the next walk (a command that saved
// 4,440 files three times by a temporary name was stopped at 4,473 of
// 5,000).
type entrySet struct {
	seed maphash.Seed
	m    map[uint64]struct{}
	// ok: the set holds every entry of the home (the last walk counted
	// all of them, and it has grown by no more than its bound since).
	// Otherwise the events count as they come, erring high.
	ok bool
	// bound is how many names the set holds before it gives up.
	bound int
}

// newEntrySet is an empty set for a home of at most files entries: it
// holds up to four times that (and 4,096 more) before the events count
// as they come.
func newEntrySet(files int64) *entrySet {
	return &entrySet{seed: maphash.MakeSeed(), m: map[uint64]struct{}{}, bound: int(4*files + 4096)}
}

// key is the hash of the entry name in the directory dir ("." or
// "./a/b", as the walk and the watches name them; name may hold a slash).
func (s *entrySet) key(dir, name string) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(dir)
	h.WriteByte('/')
	h.WriteString(name)
	return h.Sum64()
}

// reset empties the set for a walk.
func (s *entrySet) reset() {
	clear(s.m)
	s.ok = true
}

// walked adds an entry a walk counted.
func (s *entrySet) walked(dir, name string) {
	s.m[s.key(dir, name)] = struct{}{}
}

// made is by how much name, made (or moved) in dir, changes the count.
func (s *entrySet) made(dir, name string) int64 {
	if !s.ok {
		return 1
	}
	k := s.key(dir, name)
	if _, ok := s.m[k]; ok {
		return 0
	}
	if len(s.m) >= s.bound {
		s.ok = false
		clear(s.m)
		return 1
	}
	s.m[k] = struct{}{}
	return 1
}

// removed is by how much name, removed (or moved away) from dir, changes
// the count.
func (s *entrySet) removed(dir, name string) int64 {
	if !s.ok {
		return -1
	}
	k := s.key(dir, name)
	if _, ok := s.m[k]; !ok {
		return 0
	}
	delete(s.m, k)
	return -1
}
