package computer

import "hash/maphash"

// entrySet is the entries a follower's estimate counts, each by a hash
// of its path in the home: the last walk's, and those the events added
// since. An event counts an entry only when it changes the set (a
// creation of a name not in it, a deletion of one in it), so an event
// queued while a walk read the entry's directory, and read after the
// walk, does not count the entry again; nor does a directory's entry
// counted both from its listing when its watch came and from its event.
// Without it a writer of empty files had its home counted ahead of what
// it held (stopped at 4,005 of 5,000 entries).
type entrySet struct {
	seed maphash.Seed
	m    map[uint64]struct{}
	// ok: the set holds every entry of the home (the last walk counted
	// all; no more than maxNamed since). Otherwise the events count as
	// they come, erring high.
	ok bool
}

// maxNamed bounds an entrySet: past it, the events count as they come.
func maxNamed(files int64) int { return int(4*files + 4096) }

func newEntrySet() *entrySet {
	return &entrySet{seed: maphash.MakeSeed(), m: map[uint64]struct{}{}}
}

// key is the hash of the entry name in the directory dir ("." or
// "./a/b", as the walk and the watches name them).
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

// add says by how much a creation of name in dir changes the count: 1
// when the set did not hold it, or when the set is not whole.
func (s *entrySet) add(dir, name string, bound int) int64 {
	if !s.ok {
		return 1
	}
	k := s.key(dir, name)
	if _, ok := s.m[k]; ok {
		return 0
	}
	if len(s.m) >= bound {
		s.ok = false
		clear(s.m)
		return 1
	}
	s.m[k] = struct{}{}
	return 1
}

// remove says by how much a deletion of name in dir changes the count:
// -1 when the set held it, or when the set is not whole.
func (s *entrySet) remove(dir, name string) int64 {
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
