package catalog

// InGate is how many catalog requests of cs are running or
// waiting at its fairness gate.
func InGate(cs *Service) int64 {
	cs.gate.mu.Lock()
	defer cs.gate.mu.Unlock()
	return int64(cs.gate.all)
}
