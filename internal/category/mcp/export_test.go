package mcp

// shared is the session of a server whose sessions are not per owner.
func (s *server) shared() *conn {
	if sl := s.slots[""]; sl != nil {
		return sl.conn
	}
	return nil
}

// ChildPID is the process id of the server's current stdio child, or 0.
func (m *Manager) ChildPID(server string) int {
	s := m.servers[server]
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.shared()
	if c == nil || c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// ChildCgroup is the (memory) directory of the server's current stdio
// child's cgroup, or "".
func (m *Manager) ChildCgroup(server string) string {
	s := m.servers[server]
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.shared()
	if c == nil || c.group == nil {
		return ""
	}
	return c.group.Dir()
}
