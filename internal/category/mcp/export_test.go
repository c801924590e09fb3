package mcp

// ChildPID is the process id of the server's current stdio child, or 0.
func (m *Manager) ChildPID(server string) int {
	s := m.servers[server]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.conn.cmd == nil || s.conn.cmd.Process == nil {
		return 0
	}
	return s.conn.cmd.Process.Pid
}

// ChildCgroup is the (memory) directory of the server's current stdio
// child's cgroup, or "".
func (m *Manager) ChildCgroup(server string) string {
	s := m.servers[server]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.conn.group == nil {
		return ""
	}
	return s.conn.group.Dir()
}
