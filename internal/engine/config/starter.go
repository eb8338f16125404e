package config

import _ "embed"

// Starter is the commented configuration `lazaret init` writes. It must
// pass validation as written (tested), and so must its example profile once
// uncommented.
//
//go:embed starter.toml
var Starter []byte
