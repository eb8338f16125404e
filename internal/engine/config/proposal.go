package config

// ParseAutoApprove parses one auto_approve entry as the configuration
// would (policycheck checks an agent's proposed entry with it): an error
// is every refusal a configured entry gets.
func ParseAutoApprove(entry string) ([]string, error) {
	return parseAutoApprove(entry)
}

// ScriptRunner names what in the workspace decides what argv runs (the
// Makefile for make, package.json scripts for npm…), "" for a program
// that runs no workspace file.
func ScriptRunner(argv []string) string { return scriptRunner(argv) }
