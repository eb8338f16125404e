package eschost

import "slices"

// Rules are the auto_approve entries in force (a copy).
func (p *Policy) Rules() [][]string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.AutoApprove)
}

// AddRule adds an auto_approve entry to the live policy (an approved
// exec proposal); it reports false when the entry was there already.
// The entry must have passed config.ParseAutoApprove.
func (p *Policy) AddRule(argv []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.AutoApprove {
		if slices.Equal(e, argv) {
			return false
		}
	}
	p.AutoApprove = append(slices.Clip(p.AutoApprove), slices.Clone(argv))
	return true
}
